// Prose and code, deterministic, for the tests' tokenizers and haystacks: lines of 4-12 words,
// some indented, some ending as a call does ("(x, 42);"), so that lines, words and code shapes
// all occur.
#pragma once
#include <cstdint>
#include <string>

#include "core/rng.h"

static inline std::string test_text(uint64_t seed, int lines) {
    static const char* words[] = {"the", "river", "ran", "under", "a", "bridge", "and", "into", "old", "town", "while",
                                  "children", "sang", "int", "return", "value", "for", "if", "else", "struct"};
    SplitMix64 rng(seed);
    std::string text;
    for (int line = 0; line < lines; line++) {
        text += std::string(4 * rng.below(3), ' ');
        const int n = 4 + (int)rng.below(9);
        for (int w = 0; w < n; w++) text += std::string(w ? " " : "") + words[rng.below(20)];
        text += rng.below(3) ? ".\n" : "(x, 42);\n";
    }
    return text;
}
