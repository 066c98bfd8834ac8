// Command-line flags: each flag is declared once with its default and help line; parsing
// rejects unknown flags and malformed values with a one-line error that names the flag.
#pragma once
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>
#include "core/error.h"

class Flags {
   public:
    Flags(std::string program, std::string summary) : program_(std::move(program)), summary_(std::move(summary)) {}

    void add_int(const char* name, int* dst, const char* help) { add(name, Kind::Int, dst, help, std::to_string(*dst)); }
    void add_float(const char* name, float* dst, const char* help) { add(name, Kind::Float, dst, help, fmt_float(*dst)); }
    void add_string(const char* name, std::string* dst, const char* help) { add(name, Kind::String, dst, help, *dst); }
    void add_bool(const char* name, bool* dst, const char* help) { add(name, Kind::Bool, dst, help, *dst ? "on" : "off"); }

    // Parses argv; prints help and exits 0 on --help.
    void parse(int argc, char** argv) {
        for (int i = 1; i < argc; i++) {
            std::string arg = argv[i];
            if (arg == "--help" || arg == "-h") {
                print_help();
                std::exit(0);
            }
            if (arg.rfind("--", 0) != 0) fatal("unexpected argument '%s': flags start with --, see %s --help", arg.c_str(), program_.c_str());
            std::string value;
            const size_t eq = arg.find('=');
            if (eq != std::string::npos) value = arg.substr(eq + 1), arg = arg.substr(0, eq);
            auto it = flags_.find(arg.substr(2));
            if (it == flags_.end()) fatal("unknown flag %s: see %s --help", arg.c_str(), program_.c_str());
            Flag& f = it->second;
            // Keeping the last of two values would silently drop the first: the user meant one of them.
            if (f.set) fatal("flag %s is given twice: give it once", arg.c_str());
            if (f.kind == Kind::Bool && eq == std::string::npos) {
                // "--flag" alone means on; "--flag on|off" also reads.
                const std::string next = i + 1 < argc ? argv[i + 1] : "";
                const bool has_value = next == "on" || next == "off" || next == "true" || next == "false" || next == "1" || next == "0";
                if (has_value) assign(arg, f, argv[++i]);
                else *(bool*)f.dst = true;
                f.set = true;
                continue;
            }
            if (eq == std::string::npos) {
                if (i + 1 >= argc) fatal("flag %s needs a value: see %s --help", arg.c_str(), program_.c_str());
                value = argv[++i];
            }
            assign(arg, f, value);
            f.set = true;
        }
    }

    bool was_set(const char* name) const { return flags_.at(name).set; }
    // The flags declared, in order.
    const std::vector<std::string>& names() const { return order_; }

    void print_help() const {
        std::printf("%s\n\nusage: %s [flags]\n\n", summary_.c_str(), program_.c_str());
        for (const std::string& name : order_) {
            const Flag& f = flags_.at(name);
            std::string left = "  --" + name + (f.kind == Kind::Bool ? "" : " " + kind_word(f.kind));
            std::printf("%-28s %s (default: %s)\n", left.c_str(), f.help.c_str(), f.default_text.empty() ? "\"\"" : f.default_text.c_str());
        }
    }

   private:
    enum class Kind { Int, Float, String, Bool };
    struct Flag {
        Kind kind;
        void* dst;
        std::string help, default_text;
        bool set = false;
    };
    std::string program_, summary_;
    std::map<std::string, Flag> flags_;
    std::vector<std::string> order_;

    void add(const char* name, Kind kind, void* dst, const char* help, std::string def) {
        if (flags_.count(name)) fatal("internal: flag --%s is declared twice", name);
        flags_[name] = Flag{kind, dst, help, std::move(def)};
        order_.push_back(name);
    }
    static std::string fmt_float(float v) {
        char buf[32];
        snprintf(buf, sizeof buf, "%g", v);
        return buf;
    }
    static std::string kind_word(Kind k) {
        return k == Kind::Int ? "N" : k == Kind::Float ? "X" : "S";
    }
    void assign(const std::string& arg, Flag& f, const std::string& value) {
        char* end = nullptr;
        errno = 0;
        switch (f.kind) {
            case Kind::Int: {
                // Digits with an optional '-' (strtol also takes spaces and '+'); out of int's
                // range is refused, never wrapped, and the value is quoted as given.
                const bool digits = !value.empty() && (std::isdigit((unsigned char)value[0]) || value[0] == '-');
                long long v = std::strtoll(value.c_str(), &end, 10);
                if (!digits || *end || errno || v < -2147483647LL || v > 2147483647LL)
                    fatal("%s expects an integer in [-2147483647, 2147483647], got '%s'", arg.c_str(), value.c_str());
                *(int*)f.dst = (int)v;
                break;
            }
            case Kind::Float: {
                float v = std::strtof(value.c_str(), &end);
                // strtof calls a number too small for a float (1e-45) out of range too: say so.
                if (!value.empty() && !*end && errno == ERANGE && std::fabs(v) < 1.2e-38f)
                    fatal("%s %s is too small for a float (the smallest is 1.2e-38): give 0 or a larger number", arg.c_str(),
                          value.c_str());
                if (value.empty() || *end || errno || !std::isfinite(v))
                    fatal("%s expects a finite number, got '%s'", arg.c_str(), value.c_str());
                *(float*)f.dst = v;
                break;
            }
            case Kind::String: *(std::string*)f.dst = value; break;
            case Kind::Bool:
                if (value == "1" || value == "on" || value == "true") *(bool*)f.dst = true;
                else if (value == "0" || value == "off" || value == "false") *(bool*)f.dst = false;
                else fatal("%s expects on or off, got '%s'", arg.c_str(), value.c_str());
                break;
        }
    }
};
