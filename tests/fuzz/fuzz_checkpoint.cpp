// libFuzzer harness: the safetensors reader and checkpoint loading (model/safetensors.h,
// model/checkpoint.h), as `train --resume` and `infer --checkpoint` use them.
//
// Input (fuzz_safetensors_bytes, tests/fuzz/fuzz_common.h): one mode byte, then
//   mode even: the checkpoint file's bytes, verbatim (the 8-byte header length is fuzzed too);
//   mode odd:  the JSON header, a NUL byte, the tensor data: the harness writes the file with
//              the header's true length, so mutations that grow or shrink the header (most of
//              them) still reach the JSON, config and tensor checks instead of "truncated".
// The file goes to load_checkpoint (read_safetensors, then the
// metadata, config, tokenizer base64 and every tensor), then does with an accepted checkpoint
// what train and infer do: parse train_args as JSON and read its seq_len (checkpoint_seq_len),
// build the CPU model, set the weights (and optimizer state) and run one forward pass with a
// loss over 3 tokens.
// Checked on acceptance: the parameter (and m, v) buffers have the layout's size. (The loss is
// not checked: finite weights can still overflow to Inf in the forward pass.)
// Findings: see tests/fuzz/fuzz_common.h. Seeds: tests/fuzz/checkpoint/seeds (make_seeds.cpp).
#include "model/checkpoint.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzFile file("fuzz_checkpoint");
    if (size < 1) return 0;
    const std::string bytes = fuzz_safetensors_bytes(data, size);
    const std::string& path = file.write(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    try {
        const Checkpoint ck = load_checkpoint(path);
        const std::vector<ParamTensor> layout = param_layout(ck.cfg);
        const size_t n = layout.back().offset + layout.back().size;
        FUZZ_CHECK(ck.params.size() == n, "%zu params for a layout of %zu", ck.params.size(), n);
        if (ck.has_train_state) {
            FUZZ_CHECK(ck.m.size() == n && ck.v.size() == n, "optimizer state of %zu/%zu for %zu params", ck.m.size(),
                       ck.v.size(), n);
            (void)JsonParser(ck.state.train_args).parse();  // train's resume checks parse it
            (void)checkpoint_seq_len(ck, path, kMaxSeqLen);  // infer's default context
        }
        CpuBackend cpu(ck.cfg);
        ModelBackend& model = cpu;  // as train and infer hold it
        model.set_params(ck.params.data());
        if (ck.has_train_state) model.set_opt_state(ck.m.data(), ck.v.data());
        const int V = ck.cfg.vocab_size;
        const int inputs[3] = {0, V - 1, V / 2}, targets[3] = {V - 1, V / 2, 0};
        (void)model.forward(inputs, targets, nullptr, 1, 3);
    } catch (const FatalError& e) {
        fuzz_rejected(e);
    } catch (const JsonError& e) {
        fuzz_rejected(e);
    }
    return 0;
}
