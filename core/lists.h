// Numbers and comma lists as the command lines take them: an integer in a range, a count of
// tokens with a K or M suffix, a comma list without empty items, a list without repeats. Each
// refusal is one line naming the flag.
#pragma once
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"

inline long long parse_int(const std::string& flag, const std::string& s, long long lo, long long hi) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    // Digits with an optional '-' only: strtoll also takes leading spaces and a '+'.
    const bool digits = !s.empty() && (std::isdigit((unsigned char)s[0]) || s[0] == '-');
    if (!digits || *end != '\0' || errno != 0 || v < lo || v > hi)
        fatal("%s '%s' must be an integer in [%lld, %lld]", flag.c_str(), s.c_str(), lo, hi);
    return v;
}

// "2048", "2K" (2048), "1M" (1048576).
inline long long parse_tokens(const std::string& flag, const std::string& s) {
    if (s.empty()) fatal("%s: an empty length", flag.c_str());
    const char unit = s.back();
    const long long mult = unit == 'K' || unit == 'k' ? 1024 : unit == 'M' || unit == 'm' ? 1048576 : 1;
    const long long v = parse_int(flag, mult == 1 ? s : s.substr(0, s.size() - 1), 1, (1LL << 28) / mult);
    return v * mult;
}

// "a,b,c" -> {a, b, c}. An empty item ("256,", "1,,2") is refused: getline would drop a
// trailing one, and a stray comma is a typo, not a list of one.
inline std::vector<std::string> split_commas(const char* flag, const std::string& s) {
    std::vector<std::string> out;
    for (size_t at = 0; at <= s.size();) {
        const size_t comma = std::min(s.find(',', at), s.size());
        out.push_back(s.substr(at, comma - at));
        if (out.back().empty()) fatal("%s '%s': an empty item (a stray comma): give a comma list such as 1,2,3", flag, s.c_str());
        at = comma + 1;
    }
    return out;
}

// The first value of a comma list given twice (1K and 1024 are the same length), or none.
template <typename T>
inline void refuse_repeats(const char* flag, const std::vector<T>& values) {
    for (size_t i = 0; i < values.size(); i++)
        for (size_t j = 0; j < i; j++)
            if (values[i] == values[j]) fatal("%s lists entry %zu again as entry %zu: give each once", flag, j + 1, i + 1);
}
