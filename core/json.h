// A small JSON value, parser and writer: enough for safetensors headers and the model config
// kept in checkpoint metadata. Parse errors throw JsonError; callers turn them into a one-line
// fatal naming the file.
#pragma once
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

struct JsonError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Json {
    enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
    bool b = false;
    double num = 0;
    std::string str;
    std::vector<Json> arr;
    std::map<std::string, Json> obj;

    bool has(const std::string& key) const { return kind == Object && obj.count(key); }
    const Json& at(const std::string& key) const {
        auto it = obj.find(key);
        if (kind != Object || it == obj.end()) throw JsonError("missing key \"" + key + "\"");
        return it->second;
    }
    const std::string& as_string() const {
        if (kind != String) throw JsonError("expected a string");
        return str;
    }
    double as_number() const {
        if (kind != Number) throw JsonError("expected a number");
        return num;
    }
    // An integer in [lo, hi]; anything else (a fraction, out of range) throws naming `what`.
    // Converting an out-of-range double to int is undefined behaviour, so range comes first.
    long long as_int(const char* what, long long lo, long long hi) const {
        if (kind != Number) throw JsonError(std::string(what) + " is not a number");
        if (!(num >= (double)lo && num <= (double)hi) || num != std::floor(num))
            throw JsonError(std::string(what) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return (long long)num;
    }
    bool as_bool(const char* what) const {
        if (kind != Bool) throw JsonError(std::string(what) + " is not true or false");
        return b;
    }
    const std::vector<Json>& as_array(const char* what) const {
        if (kind != Array) throw JsonError(std::string(what) + " is not an array");
        return arr;
    }
};

class JsonParser {
   public:
    explicit JsonParser(const std::string& text) : s_(text) {}
    Json parse() {
        Json v = value(0);
        skip_ws();
        if (i_ != s_.size()) fail("trailing characters");
        return v;
    }

   private:
    const std::string& s_;
    size_t i_ = 0;

    [[noreturn]] void fail(const char* what) {
        throw JsonError(std::string(what) + " at byte " + std::to_string(i_));
    }
    void skip_ws() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) i_++;
    }
    bool consume(char c) {
        skip_ws();
        if (i_ < s_.size() && s_[i_] == c) {
            i_++;
            return true;
        }
        return false;
    }
    void expect(char c) {
        if (!consume(c)) fail((std::string("expected '") + c + "'").c_str());
    }
    Json value(int depth) {
        if (depth > 64) fail("nesting too deep");
        skip_ws();
        if (i_ >= s_.size()) fail("unexpected end");
        Json v;
        char c = s_[i_];
        if (c == '{') {
            i_++;
            v.kind = Json::Object;
            if (consume('}')) return v;
            do {
                skip_ws();
                std::string key = string_literal();
                expect(':');
                // A repeated key is refused: a reader that kept the last one would load another
                // value than a reader that kept the first (a config edited by hand, or forged).
                if (v.obj.count(key)) fail(("key \"" + key + "\" given twice").c_str());
                v.obj[key] = value(depth + 1);
            } while (consume(','));
            expect('}');
        } else if (c == '[') {
            i_++;
            v.kind = Json::Array;
            if (consume(']')) return v;
            do v.arr.push_back(value(depth + 1));
            while (consume(','));
            expect(']');
        } else if (c == '"') {
            v.kind = Json::String;
            v.str = string_literal();
        } else if (s_.compare(i_, 4, "true") == 0) {
            i_ += 4, v.kind = Json::Bool, v.b = true;
        } else if (s_.compare(i_, 5, "false") == 0) {
            i_ += 5, v.kind = Json::Bool;
        } else if (s_.compare(i_, 4, "null") == 0) {
            i_ += 4;
        } else if (c == '-' || isdigit((unsigned char)c)) {
            v.kind = Json::Number;
            v.num = number();
        } else {
            fail("unexpected character");
        }
        return v;
    }
    // Exactly four hex digits after "\\u" (std::stoul would accept "+1" or " 1f" and throw on
    // "ZZZZ").
    unsigned hex4() {
        if (i_ + 4 > s_.size()) fail("bad \\u escape: needs four hex digits");
        unsigned v = 0;
        for (int k = 0; k < 4; k++) {
            const char h = s_[i_++];
            const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) fail("bad \\u escape: needs four hex digits");
            v = v * 16 + (unsigned)d;
        }
        return v;
    }
    static void append_utf8(std::string& out, unsigned cp) {
        if (cp < 0x80) {
            out += (char)cp;
        } else if (cp < 0x800) {
            out += (char)(0xC0 | (cp >> 6)), out += (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += (char)(0xE0 | (cp >> 12)), out += (char)(0x80 | ((cp >> 6) & 0x3F)), out += (char)(0x80 | (cp & 0x3F));
        } else {
            out += (char)(0xF0 | (cp >> 18)), out += (char)(0x80 | ((cp >> 12) & 0x3F)),
                out += (char)(0x80 | ((cp >> 6) & 0x3F)), out += (char)(0x80 | (cp & 0x3F));
        }
    }
    // JSON's number grammar exactly: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, parsed with
    // strtod; values that overflow a double are refused (a JSON number is finite).
    double number() {
        const size_t start = i_;
        auto digits = [&] {
            const size_t at = i_;
            while (i_ < s_.size() && isdigit((unsigned char)s_[i_])) i_++;
            return i_ - at;
        };
        if (i_ < s_.size() && s_[i_] == '-') i_++;
        if (i_ < s_.size() && s_[i_] == '0') i_++;
        else if (digits() == 0) fail("bad number");
        if (i_ < s_.size() && s_[i_] == '.') {
            i_++;
            if (digits() == 0) fail("bad number");
        }
        if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
            i_++;
            if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) i_++;
            if (digits() == 0) fail("bad number");
        }
        const std::string text = s_.substr(start, i_ - start);
        const double v = std::strtod(text.c_str(), nullptr);
        if (!std::isfinite(v)) fail("number out of range");
        return v;
    }
    std::string string_literal() {
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string");
        i_++;
        std::string out;
        while (true) {
            if (i_ >= s_.size()) fail("unterminated string");
            char c = s_[i_++];
            if (c == '"') break;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i_ >= s_.size()) fail("unterminated escape");
            char e = s_[i_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    unsigned cp = hex4();
                    // A UTF-16 surrogate pair encodes one code point above U+FFFF; a lone
                    // surrogate is not a character and is refused.
                    if (cp >= 0xD800 && cp <= 0xDBFF) {
                        if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') fail("lone \\u surrogate");
                        i_ += 2;
                        const unsigned lo = hex4();
                        if (lo < 0xDC00 || lo > 0xDFFF) fail("bad \\u surrogate pair");
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                        fail("lone \\u surrogate");
                    }
                    append_utf8(out, cp);
                    break;
                }
                default: fail("bad escape");
            }
        }
        return out;
    }
};

inline std::string json_quote(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"') out += "\\\"";
        else if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c < 0x20) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else out += (char)c;
    }
    return out + "\"";
}
