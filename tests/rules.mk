# Op test harness rules. Included by the top-level Makefile, which defines CXX and CXXFLAGS
# (with -I. so "layers/..." and "tests/..." includes resolve) and uses build/ for outputs.
#
#   make test-ops                  build and run the CPU op harness (gradient checks, float vs double,
#                                  determinism; ~1 s on 2 cores). OPS_ARGS="--seed 7" picks the inputs.
#   make test-ops-perf             forward/backward timing table of matmul and attention
#   make test-gradcheck-can-fail   the harness built with a deliberately wrong GELU backward
#                                  (-DBREAK_GELU_BACKWARD) must report FAIL for gelu and exit non-zero

OPS_ARGS ?=
OPS_TEST_DEPS := tests/test_ops_cpu.cpp tests/check.h tests/gradcheck.h $(wildcard core/*.h layers/*.h optim/*.h)

build/test_ops_cpu: $(OPS_TEST_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -o $@ $<

build/test_ops_cpu_broken_gelu: $(OPS_TEST_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -DBREAK_GELU_BACKWARD -o $@ $<

.PHONY: test-ops test-ops-perf test-gradcheck-can-fail

test-ops: build/test_ops_cpu
	build/test_ops_cpu $(OPS_ARGS)

test-ops-perf: build/test_ops_cpu
	build/test_ops_cpu --perf

# Succeeds only if the broken build fails, and fails where it should: a gelu gradient check.
test-gradcheck-can-fail: build/test_ops_cpu_broken_gelu
	@out=$$(build/test_ops_cpu_broken_gelu $(OPS_ARGS) 2>&1); code=$$?; \
	printf '%s\n' "$$out" | grep -E '^FAIL|^[0-9]+ passed, [0-9]+ failed'; \
	if [ $$code -ne 0 ] && printf '%s\n' "$$out" | grep -qE '^FAIL grad +gelu\.'; then \
	    echo "OK: the gradient check caught the broken gelu backward (-DBREAK_GELU_BACKWARD): exit $$code"; \
	else \
	    echo "ERROR: the broken gelu backward (-DBREAK_GELU_BACKWARD) was NOT caught (exit $$code)"; exit 1; \
	fi

# The launcher mapping and the rendezvous (comm/rendezvous.h) with forked ranks on the CPU; its fuzzer
# (hostile clients beside real ranks) is the same binary with --fuzz.
build/test_rendezvous: tests/test_rendezvous.cpp comm/rendezvous.h comm/launcher_env.h core/sha256.h tests/check.h core/error.h
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -o $@ $< -lpthread
