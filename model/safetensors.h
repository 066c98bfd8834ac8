// Reading and writing safetensors files (the format Hugging Face tools read):
//   8 bytes   little-endian u64 header length n
//   n bytes   JSON: {"__metadata__": {string: string}, "<name>": {"dtype": "F32",
//             "shape": [..], "data_offsets": [begin, end]}, ...}, offsets relative to the data
//   the data  tensors back to back, row-major, little-endian
// Writes go to "<path>.tmp" and are renamed into place, so a crash never leaves a torn file
// and never destroys the previous one.
#pragma once
#include <algorithm>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>
#include "core/io.h"
#include "layers/common.h"
#include "core/json.h"

// What a file is to the user, so that its errors name the right thing and the right fix: a
// checkpoint (train writes them), a KV cache (infer --save-cache), attention_tool's output.
struct SafetensorsRole {
    const char* noun;       // "checkpoint"
    const char* fix;        // what to do about a bad one: "use another checkpoint"
    const char* opened_as;  // how an unreadable path is named: "checkpoint", "--load-cache"
    const char* open_fix;   // what to do about it
};
constexpr SafetensorsRole kCheckpointRole{"checkpoint", "use another checkpoint", "checkpoint",
                                          "check the path (train writes checkpoints to --out)"};
constexpr SafetensorsRole kCacheRole{"KV cache", "prefill again with infer --save-cache", "--load-cache",
                                     "give a file that infer --save-cache wrote with this --checkpoint"};
constexpr SafetensorsRole kAttentionFileRole{"attention file", "run attention_tool --out again", "attention file",
                                             "check the path"};

struct TensorToWrite {
    std::string name;
    std::vector<int> shape;
    const void* data;
    const char* dtype = "F32";  // F32, F64, BF16, I32

    size_t element_bytes() const {
        const std::string d = dtype;
        return d == "F64" ? 8 : d == "BF16" ? 2 : 4;
    }
};

inline void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata, SafetensorsRole role = kCheckpointRole) {
    std::string header = "{\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
        header += (first ? "" : ",") + json_quote(k) + ":" + json_quote(v);
        first = false;
    }
    header += "}";
    size_t offset = 0;
    for (const TensorToWrite& t : tensors) {
        size_t n = 1;
        std::string shape = "[";
        for (size_t i = 0; i < t.shape.size(); i++) {
            n *= (size_t)t.shape[i];
            shape += (i ? "," : "") + std::to_string(t.shape[i]);
        }
        shape += "]";
        const size_t bytes = n * t.element_bytes();
        header += "," + json_quote(t.name) + ":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + shape +
                  ",\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
        offset += bytes;
    }
    header += "}";
    while (header.size() % 8) header += ' ';  // keeps the data 8-byte aligned, as the format recommends

    const std::string tmp = path + ".tmp";
    FILE* f = open_scratch_file(tmp);
    const uint64_t n = header.size();
    bool ok = std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(header.data(), 1, n, f) == n;
    for (const TensorToWrite& t : tensors) {
        size_t count = 1;
        for (int d : t.shape) count *= (size_t)d;
        ok = ok && std::fwrite(t.data, t.element_bytes(), count, f) == count;
    }
    ok = ok && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) {
        std::remove(tmp.c_str());
        fatal("writing %s %s failed (disk full?): free space and retry; the file that was there is untouched", role.noun, path.c_str());
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        fatal("cannot rename %s to %s (%s)", tmp.c_str(), path.c_str(), std::strerror(errno));
    }
    if (!fsync_parent_dir(path)) fatal("cannot sync the directory of %s (%s)", path.c_str(), std::strerror(errno));
}

struct SafetensorsFile {
    struct Tensor {
        std::vector<int> shape;
        size_t begin, end;  // byte offsets into data
    };
    std::string path;
    SafetensorsRole role = kCheckpointRole;
    std::map<std::string, std::string> metadata;
    std::map<std::string, Tensor> tensors;
    std::vector<char> data;

    bool has(const std::string& name) const { return tensors.count(name) != 0; }
    // Fatal when the tensor is missing or its shape differs from `shape`.
    const Tensor& find(const std::string& name, const std::vector<int>& shape) const {
        auto it = tensors.find(name);
        if (it == tensors.end())
            fatal("%s %s has no tensor \"%s\": it was written for another model: %s", role.noun, path.c_str(), name.c_str(), role.fix);
        if (it->second.shape != shape)
            fatal("%s %s: tensor \"%s\" has another shape than the model expects: %s", role.noun, path.c_str(), name.c_str(), role.fix);
        return it->second;
    }
    // Copies the tensor's values to dst. memcpy, not a cast pointer: a hostile file may place a
    // tensor at an offset that is not a multiple of 4.
    void read(const std::string& name, const std::vector<int>& shape, float* dst) const {
        const Tensor& t = find(name, shape);
        std::memcpy(dst, data.data() + t.begin, t.end - t.begin);
    }
};

// The format's own bound on the JSON header (a checkpoint's, tokenizer included, is a few MB).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

// role: what the file is to the user (its messages name it and the fix); max_bytes: the largest
// file accepted, refused from its size before a byte is read (core/io.h's open_regular_file,
// which also refuses FIFOs, devices and directories).
inline SafetensorsFile read_safetensors(const std::string& path, SafetensorsRole role = kCheckpointRole,
                                        uint64_t max_bytes = kReadFileMaxBytes) {
    SafetensorsFile out;
    out.path = path;
    out.role = role;
    uint64_t file_size = 0;
    const int fd = open_regular_file(path, max_bytes, role.opened_as, role.open_fix, &file_size);
    FILE* f = ::fdopen(fd, "rb");
    if (!f) {
        ::close(fd);
        fatal("%s %s: cannot read it (%s)", role.noun, path.c_str(), std::strerror(errno));
    }
    const long long size = (long long)file_size;
    uint64_t n = 0;
    if (size < 8 || std::fread(&n, 8, 1, f) != 1 || n > (uint64_t)size - 8) {
        std::fclose(f);
        fatal("%s %s is truncated or not a safetensors file: %s", role.noun, path.c_str(), role.fix);
    }
    if (n > kMaxSafetensorsHeaderBytes) {
        std::fclose(f);
        fatal("%s %s is corrupt (a header of %llu bytes, more than the %llu a safetensors header may hold): %s", role.noun,
              path.c_str(), (unsigned long long)n, (unsigned long long)kMaxSafetensorsHeaderBytes, role.fix);
    }
    // The header first: its tensors must tile the data before the data is read, so a file whose
    // size its header does not account for (a sparse 20 GB file, say) is refused unread.
    std::string header(n, '\0');
    if (std::fread(&header[0], 1, n, f) != n) {
        std::fclose(f);
        fatal("cannot read %s %s (did it change while read?): %s", role.noun, path.c_str(), role.fix);
    }
    const size_t data_size = (size_t)size - 8 - n;
    try {
        Json j = JsonParser(header).parse();
        if (j.kind != Json::Object) throw JsonError("header is not an object");
        for (const auto& [name, v] : j.obj) {
            if (name == "__metadata__") {
                if (v.kind != Json::Object) throw JsonError("__metadata__ is not an object");
                for (const auto& [k, s] : v.obj) out.metadata[k] = s.as_string();
                continue;
            }
            if (v.kind != Json::Object) throw JsonError("tensor " + name + " is not an object");
            if (v.at("dtype").as_string() != "F32") throw JsonError("tensor " + name + " is not F32");
            SafetensorsFile::Tensor t;
            // Element count in 64 bits, bounded by the file: no product of hostile dims overflows.
            uint64_t count = 1;
            const std::vector<Json>& dims = v.at("shape").as_array("shape");
            if (dims.size() > 8) throw JsonError("tensor " + name + " has more than 8 dimensions");
            for (const Json& d : dims) {
                const long long n = d.as_int("a dimension", 0, 2147483647);
                t.shape.push_back((int)n);
                count = n == 0 ? 0 : count > data_size / (uint64_t)n ? data_size + 1 : count * (uint64_t)n;
            }
            const std::vector<Json>& off = v.at("data_offsets").as_array("data_offsets");
            if (off.size() != 2) throw JsonError("bad data_offsets for " + name);
            t.begin = (size_t)off[0].as_int("data_offsets", 0, (long long)data_size);
            t.end = (size_t)off[1].as_int("data_offsets", 0, (long long)data_size);
            if (t.end < t.begin || count > data_size || t.end - t.begin != count * 4)
                throw JsonError("tensor " + name + " lies outside the file");
            out.tensors[name] = t;
        }
        // The tensors tile the data exactly, as the format requires: no two share bytes (a
        // weight read from the optimizer's state), no bytes lie between or after them.
        std::vector<std::pair<size_t, std::string>> by_begin;
        for (const auto& [name, t] : out.tensors) by_begin.push_back({t.begin, name});
        std::sort(by_begin.begin(), by_begin.end());
        for (size_t i = 1; i < by_begin.size(); i++)  // overlaps first: a moved tensor also leaves a gap
            if (by_begin[i].first < out.tensors[by_begin[i - 1].second].end)
                throw JsonError("tensor " + by_begin[i].second + " overlaps tensor " + by_begin[i - 1].second);
        size_t at = 0;
        std::string before = "the header";
        for (const auto& [begin, name] : by_begin) {
            if (begin > at) throw JsonError(std::to_string(begin - at) + " bytes between " + before + " and tensor " + name);
            at = out.tensors[name].end, before = "tensor " + name;
        }
        if (at != data_size) throw JsonError(std::to_string(data_size - at) + " bytes after " + before);
    } catch (const JsonError& e) {
        std::fclose(f);
        fatal("%s %s is corrupt (%s): %s", role.noun, path.c_str(), e.what(), role.fix);
    }
    try {
        out.data.resize(data_size);
    } catch (...) {
        std::fclose(f);
        throw;
    }
    const bool read_ok = std::fread(out.data.data(), 1, data_size, f) == data_size;
    std::fclose(f);
    if (!read_ok) fatal("cannot read %s %s (did it change while read?): %s", role.noun, path.c_str(), role.fix);
    return out;
}
