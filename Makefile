# pxvm - see README.md. `make` builds bin/; `make test`, `make asan`, `make asan-python`, `make coverage`, `make mutate`, `make bench`, `make deps`.
# the default goal is `all`, whatever rule comes first below
.DEFAULT_GOAL := all
CC      ?= cc
BUILD   ?= build
BIN     ?= bin
OPT     ?= -O2
WARN    := -Wall -Wextra -Wshadow -Wconversion -Wno-sign-conversion -Wstrict-prototypes -Wformat=2
CFLAGS  += -std=c11 $(OPT) -g $(WARN) -ffp-contract=off -fno-fast-math -pthread -fPIC -MMD -MP
LDLIBS  += -lpng -lz -lturbojpeg -ljansson -lm -pthread
# float-cast-overflow (a double beyond an integer type, converted) is not part of gcc's "undefined"
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=undefined,float-cast-overflow
LDFLAGS += -fsanitize=address,undefined,float-cast-overflow
endif
# COV=1: gcc's line and branch counters (make coverage)
ifeq ($(COV),1)
CFLAGS  += --coverage
LDFLAGS += --coverage
endif

# The CUDA-GL executor is built when nvcc and the EGL and GLEW headers are present (CUDA_GL=0
# turns it off; `make deps` installs the headers). It is compiled for Hopper (sm_90; EMBED's
# object sm_90a) and links the static CUDA runtime, so the binaries need only the driver, EGL, GL
# and GLEW at run time.
CUDA_HOME ?= /usr/local/cuda
NVCC    ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard $(CUDA_HOME)/bin/nvcc))
CUDA_GL ?= $(if $(and $(NVCC),$(wildcard /usr/include/EGL/egl.h),$(wildcard /usr/include/GL/glew.h)),1,0)
NVCCFLAGS := -std=c++17 -O3 -g --fmad=false -Xcompiler -Wall,-Wextra,-fPIC -Werror all-warnings -MMD -MP
# Hopper machine code, and PTX that newer GPUs compile at load
NVCC_ARCH := -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90

# every file of an executor is built: an opcode family's file needs no line here
EXECUTOR_CPU_SRC := $(sort $(wildcard executors/cpu/*.c))
EXECUTOR_GL_OBJ  := $(patsubst %.cu,$(BUILD)/%.o,$(sort $(wildcard executors/cuda_gl/*.cu)))
LIB_SRC := api/runner.c api/errors.c api/images.c api/policy.c api/program.c api/sizes.c api/fixation.c api/tokens.c api/video.c isa/pxisa.c vm/error.c vm/image.c vm/decode.c vm/png.c vm/jpeg.c vm/view.c vm/parse.c vm/resolve.c vm/pxi_build.c assembler/plan.c assembler/plan_error.c assembler/asm.c \
           vm/resize.c vm/policy.c vm/resize_kernels.c vm/ragged.c \
           assembler/disasm.c assembler/dmath.c \
           assembler/asm_lex.c assembler/asm_directives.c \
           assembler/plan_schemes.c assembler/plan_program.c assembler/plan_overlay.c \
           vm/names.c vm/validate.c vm/launch_plan.c vm/geometry.c vm/format.c executors/registry.c vm/tokens.c vm/retarget_check.c \
           $(EXECUTOR_CPU_SRC)
# libpxvm.so.$(SOVERSION): the public API of include/pxvm.h (only those symbols are exported)
SOVERSION := 1
VERSION   := 1.0.0
SHLIB   := $(BUILD)/libpxvm.so.$(VERSION)
# pxbatch is built with MPI when mpicc is here (Debian's libopenmpi-dev), else for one process
MPICC   ?= $(shell command -v mpicc 2>/dev/null)
TOOLS   := $(SHLIB) $(BIN)/pxbatch $(BIN)/pxrun $(BIN)/pxasm $(BIN)/pxtest $(BIN)/gen_spec $(BIN)/pxzoom $(BIN)/pxconform \
           $(BIN)/pxresize $(BIN)/bench_retarget
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
ifeq ($(CUDA_GL),1)
TOOLS    += $(BIN)/bench_gpu $(BIN)/bench_device $(BIN)/bench_fixation $(BIN)/bench_video $(BIN)/bench_embed_floor
LIB_OBJ  += $(EXECUTOR_GL_OBJ)
CPPFLAGS += -DPXVM_HAVE_CUDA_GL
LDLIBS   += -L$(CUDA_HOME)/lib64 -lcudart_static -lGLEW -lEGL -lGL -ldl -lrt -lstdc++
# the video conformance borrows device frames (cudaMalloc, cudaMemcpy) on the CUDA-GL executor
$(BUILD)/tests/conformance/video.o: CPPFLAGS += -isystem $(CUDA_HOME)/include
# EMBED's GEMM uses Hopper's warpgroup MMA (sm_90a machine code: H100, H200); the PTX, for other
# GPUs, takes its mma.sync path
$(BUILD)/executors/cuda_gl/embed.o: NVCC_ARCH := -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90
# ... tests/unit/test_ragged.c a device dst and device images (cudaMalloc) for ragged batches
$(BUILD)/tests/unit/test_ragged.o: CPPFLAGS += -isystem $(CUDA_HOME)/include
$(BUILD)/tests/unit/test_read.o: CPPFLAGS += -isystem $(CUDA_HOME)/include
# ... and bench_retarget a device frame (what a new size adds to binding one)
$(BUILD)/tests/bench/bench_retarget.o: CPPFLAGS += -isystem $(CUDA_HOME)/include
endif
# The Python package's compiled fast path (python/pxvm/_native.c, issue 25): built in place, next to
# the .py files, when the headers of the python3 that runs the tests are here (Debian's
# python3-dev); without it the package keeps its ctypes path. The limited API of 3.11 (abi3): one
# .so for that python and later ones. It does not link libpxvm (the package hands it the library
# it loaded), and it is built alike in every configuration (no sanitizer: python3 is not built
# with one).
PYTHON  ?= /usr/bin/python3
PY_INCLUDE := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
NATIVE  ?= $(if $(and $(PY_INCLUDE),$(wildcard $(PY_INCLUDE)/Python.h)),1,0)
NATIVE_SO := python/pxvm/_native.abi3.so
ifeq ($(NATIVE),1)
TOOLS   += $(NATIVE_SO)
endif
$(NATIVE_SO): python/pxvm/_native.c include/pxvm.h
	$(CC) -std=c11 -O2 -g $(WARN) -fPIC -shared -Iinclude -isystem $(PY_INCLUDE) $< -o $@
TEST_SRC := $(wildcard tests/unit/*.c) tests/golden/golden.c tests/conformance/cases.c tests/conformance/video.c
PROGRAMS := $(patsubst %.pxs,%.pxi,$(wildcard programs/*.pxs)) $(patsubst %.json,%.pxi,$(wildcard programs/*.json))

all: check-deps $(TOOLS) $(PROGRAMS) isa/SPEC.md
	@echo "pxvm: built the CPU executor$(if $(filter 1,$(CUDA_GL)), and the CUDA-GL executor ($(NVCC)), (no CUDA-GL executor: needs nvcc and 'apt-get install libegl-dev libglew-dev'))$(if $(filter 1,$(NATIVE)),; the Python fast path ($(NATIVE_SO)),; no Python fast path: the package uses ctypes alone (needs 'apt-get install python3-dev'))" 

check-deps:
	@test -f /usr/include/png.h || { echo "libpng headers missing: run 'make deps' (apt-get install -y libpng-dev)"; exit 1; }
	@test -f /usr/include/turbojpeg.h || { echo "libjpeg-turbo headers missing: run 'make deps' (apt-get install -y libturbojpeg0-dev)"; exit 1; }
	@test -f /usr/include/jansson.h || { echo "jansson headers missing: run 'make deps' (apt-get install -y libjansson-dev)"; exit 1; }

# Objects are rebuilt when the configuration (CUDA-GL on or off, sanitizers) changes.
CONFIG_STAMP := $(BUILD)/config-cuda$(CUDA_GL)-san$(or $(SAN),0)
# The CPU executor's loops are written for the vectorizer; -O2 in gcc 12 vectorizes only the
# cheapest loops.
$(addprefix $(BUILD)/executors/cpu/,run.o resources.o plan.o bind.o pyramid.o fetch.o dot.o embed.o video.o resize.o) $(BUILD)/vm/tokens.o $(BUILD)/vm/resize_kernels.o: OPT += -O3

$(CONFIG_STAMP):
	@mkdir -p $(BUILD) && rm -f $(BUILD)/config-* && touch $@

$(BUILD)/%.o: %.c $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(NVCC_ARCH) -c $< -o $@

$(BUILD)/libpxvm.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(SHLIB): $(LIB_OBJ) api/libpxvm.map
	$(CC) -shared -Wl,-soname,libpxvm.so.$(SOVERSION) -Wl,--version-script=api/libpxvm.map -Wl,-z,defs \
	    $(LDFLAGS) $(LIB_OBJ) $(LDLIBS) -o $@
	ln -sf libpxvm.so.$(VERSION) $(BUILD)/libpxvm.so.$(SOVERSION)
	ln -sf libpxvm.so.$(SOVERSION) $(BUILD)/libpxvm.so

# The library reads video files (api/video.c: pxvm_video_*, pxrun --frames) through FFmpeg's
# libraries: built with their headers when installed (Debian's libavformat-dev libavcodec-dev
# libswscale-dev), the libraries opened at run time (so libpxvm loads where they are missing);
# folders, globs and raw frames need nothing.
FFMPEG_PKGS := libavformat libavcodec libswscale libavutil
HAVE_FFMPEG := $(shell pkg-config --exists $(FFMPEG_PKGS) 2>/dev/null && echo 1)
ifeq ($(HAVE_FFMPEG),1)
$(BUILD)/api/video.o: CPPFLAGS += -DPXVM_HAVE_FFMPEG $(shell pkg-config --cflags $(FFMPEG_PKGS))
LDLIBS += -ldl
endif
$(BUILD)/api/video.o: $(CONFIG_STAMP) $(BUILD)/ffmpeg-$(or $(HAVE_FFMPEG),0)
$(BUILD)/ffmpeg-%:
	@mkdir -p $(BUILD) && rm -f $(BUILD)/ffmpeg-* && touch $@
# the tools' output files (tools/outputs.c: all-or-nothing files, .npy), not part of the library
TOOLS_OBJ := $(BUILD)/tools/outputs.o
$(BIN)/pxrun: $(BUILD)/tools/pxrun.o $(BUILD)/tools/args.o $(BUILD)/tools/pxrun_args.o $(BUILD)/tools/pxrun_notes.o $(BUILD)/tools/pxrun_outputs.o $(BUILD)/tools/pxrun_size.o $(BUILD)/tools/pxrun_frames.o $(BUILD)/tools/pxrun_fixations.o $(BUILD)/tools/frames.o $(TOOLS_OBJ) $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
PXBATCH_FILES := tools/pxbatch_verify.c tools/pxbatch_marker.c tools/pxbatch_names.c tools/pxbatch_npy.c tools/pxbatch_sha256.c
PXBATCH_OBJ := $(BUILD)/tools/pxbatch.o $(BUILD)/tools/pxbatch_job.o $(BUILD)/tools/pxbatch_shard.o $(BUILD)/tools/pxbatch_decode.o $(BUILD)/tools/pxbatch_workers.o \
               $(BUILD)/tools/pxbatch_stats.o \
               $(PXBATCH_FILES:%.c=$(BUILD)/%.o)
$(PXBATCH_OBJ): $(BUILD)/tools/%.o: tools/%.c $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(if $(MPICC),$(MPICC) -DPXVM_HAVE_MPI,$(CC)) $(CPPFLAGS) $(CFLAGS) -c $< -o $@
build/fuzz/fuzz_pxbatch: FUZZ_SRC := $(PXBATCH_FILES)
build/fuzz/fuzz_pxbatch: $(PXBATCH_FILES) tools/pxbatch.h tools/pxbatch_files.h
$(BIN)/pxbatch: $(PXBATCH_OBJ) $(BUILD)/tools/args.o $(BUILD)/tools/pxrun_size.o $(TOOLS_OBJ) $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(or $(MPICC),$(CC)) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/pxasm: $(BUILD)/tools/pxasm.o $(BUILD)/tools/args.o $(TOOLS_OBJ) $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/gen_spec: $(BUILD)/tools/gen_spec.o $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/pxzoom: $(BUILD)/tools/pxzoom.o $(TOOLS_OBJ) $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/pxresize: $(BUILD)/tools/pxresize.o $(TOOLS_OBJ) $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/pxtest: $(TEST_SRC:%.c=$(BUILD)/%.o) $(TOOLS_OBJ) $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lz -o $@
$(BIN)/pxconform: $(BUILD)/tests/conformance/pxconform.o $(BUILD)/tests/conformance/retarget_conform.o $(BUILD)/tests/conformance/cases.o $(BUILD)/tests/conformance/video.o $(BUILD)/tests/golden/golden.o $(TOOLS_OBJ) $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/bench_gpu: $(BUILD)/tests/bench/bench_gpu.o $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/bench_device: $(BUILD)/tests/bench/bench_device.o $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/bench_fixation: $(BUILD)/tests/bench/bench_fixation.o $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/bench_video: $(BUILD)/tests/bench/bench_video.o $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/bench_embed_floor: $(BUILD)/tests/bench/bench_embed_floor.o
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/bench_retarget: $(BUILD)/tests/bench/bench_retarget.o $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BIN)/bench_cpu: $(BUILD)/tests/bench/bench_cpu.o $(BUILD)/libpxvm.a
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The example programs are built from their sources: assembly (.pxs) or allocation plans (.json,
# where all float math happens, at build time, never in the VM).
programs/%.pxi: programs/%.pxs $(BIN)/pxasm
	$(BIN)/pxasm $< -o $@
programs/%.pxi: programs/%.json $(BIN)/pxasm
	$(BIN)/pxasm --plan $< -o $@ > /dev/null

isa/SPEC.md: isa/SPEC.in.md $(BIN)/gen_spec
	$(BIN)/gen_spec isa/SPEC.in.md > $@.tmp && mv $@.tmp $@

# the C suite, then the Python tests against $(BUILD)/libpxvm.so.1 (tests/run-tests); outside the
# sanitizer build (ASan brings its own allocator) also the guard-page allocator's run
GUARD_MALLOC := $(if $(filter 1,$(SAN)),,$(BUILD)/guard_malloc.so)
test: all video-data $(GUARD_MALLOC)
	PXVM_PYTEST=$(or $(PXVM_PYTEST),1) tests/run-tests $(BIN) $(BUILD)

$(BUILD)/guard_malloc.so: tests/guard/guard_malloc.c
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -O2 $(WARN) -fPIC -shared $< -o $@

# OpenCV's vtest.avi (768x576, 795 frames, a static camera) and, with camera motion, Megamind.avi
# (720x528, 270 frames) and tree.avi (320x240, 444 frames) for the video tests, from Debian's
# opencv-doc package: downloaded and unpacked here (no root needed); without a network the tests
# that need them skip.
VIDEO_DATA := build/data/vtest.avi build/data/Megamind.avi build/data/tree.avi
video-data: $(VIDEO_DATA)
$(VIDEO_DATA):
	@mkdir -p build/data/opencv-doc
	@cd build/data/opencv-doc && { ls opencv-doc_*.deb >/dev/null 2>&1 || apt-get download opencv-doc >/dev/null 2>&1; } && \
	    rm -rf x$(notdir $@) && dpkg -x opencv-doc_*.deb x$(notdir $@) && \
	    cp x$(notdir $@)/usr/share/doc/opencv-doc/examples/data/$(notdir $@) ../$(notdir $@) && rm -rf x$(notdir $@) || \
	    echo "video-data: could not fetch opencv-doc (offline?): the $(notdir $@) tests will skip"

goldens: all
	PXRUN=$(BIN)/pxrun tests/golden/make-goldens

# CPU benchmark with its baselines in the same run (needs python3-opencv: make bench-deps)
bench: $(BIN)/bench_cpu
	@mkdir -p build/bench
	@# alternated three times: this machine's memory bandwidth drifts between runs
	for i in 1 2 3; do \
	    $(BIN)/bench_cpu > build/bench/pxvm_cpu$$i.json && \
	    /usr/bin/python3 tests/bench/bench_opencv.py > build/bench/opencv$$i.json || exit 1; done
	/usr/bin/python3 tests/bench/report.py cpu build/bench/pxvm_cpu1.json,build/bench/pxvm_cpu2.json,build/bench/pxvm_cpu3.json \
	    build/bench/opencv1.json,build/bench/opencv2.json,build/bench/opencv3.json tests/bench/results/cpu.json \
	    | tee tests/bench/results/cpu.md

bench-deps:
	$(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y python3-opencv python3-numpy

asan:
	$(MAKE) BUILD=build/asan BIN=build/asan/bin SAN=1 OPT=-O1 CUDA_GL=0 PXVM_PYTEST=0 test

# The Python tests of memory safety under Debian's python3 with gcc's ASan runtime
# preloaded (libstdc++ too: torch throws C++ exceptions, whose interceptor needs it loaded first),
# against build/asan's libpxvm and a sanitized _native (PXVM_NATIVE_SO), both
# -fsanitize=address,undefined. Leaks are not checked (python3 keeps its own); the tests that
# measure RSS are left out (ASan's quarantine holds freed memory). Prints "N passed, N failed".
# ASAN_PY_TESTS: the test_safety_* files and the tests of runners, the compiled path, tokens,
# seeds, Ragged, streams, size= and bad input (under a minute on 2 cores); the decoders' and
# RESIZE's bytes are left to the C suite under `make asan`.
ASAN_RT       ?= $(shell $(CC) -print-file-name=libasan.so)
ASAN_PY_TESTS ?= $(wildcard tests/python/test_safety_*.py) $(addprefix tests/python/test_,native.py ragged.py ragged_dynamic.py \
                 seeds.py api.py tokens.py fixation.py video.py size.py bad_input.py)
build/asan/_native.abi3.so: python/pxvm/_native.c include/pxvm.h
	@mkdir -p build/asan
	$(CC) -std=c11 -O1 -g $(WARN) -fPIC -shared -fsanitize=address,undefined -fno-omit-frame-pointer \
	    -fno-sanitize-recover=undefined -Iinclude -isystem $(PY_INCLUDE) $< -o $@
asan-python:
	$(MAKE) BUILD=build/asan BIN=build/asan/bin SAN=1 OPT=-O1 CUDA_GL=0 lib build/asan/bin/pxrun build/asan/bin/pxasm \
	    build/asan/bin/pxbatch build/asan/_native.abi3.so
	@LD_PRELOAD="$(realpath $(ASAN_RT)) $(realpath $(shell $(CC) -print-file-name=libstdc++.so.6))" \
	    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    PXVM_LIB=$(CURDIR)/build/asan/libpxvm.so.1 PXVM_NATIVE_SO=$(CURDIR)/build/asan/_native.abi3.so \
	    PXVM_BIN=build/asan/bin $(PYTHON) -m pytest -q --capture=sys -p no:cacheprovider -k "not leak_nothing and not extension_is_built_where_it_can_be" \
	    $(ASAN_PY_TESTS) > build/asan/python.log 2>&1; st=$$?; cat build/asan/python.log; \
	    sum=$$(grep -E '^(=+ )?[0-9]+ (passed|failed)' build/asan/python.log | tail -1); \
	    p=$$(echo "$$sum" | grep -oE '[0-9]+ passed' | cut -d' ' -f1); \
	    f=$$(echo "$$sum" | grep -oE '[0-9]+ (failed|errors?)' | awk '{n += $$1} END {print n + 0}'); \
	    if [ $$st -ne 0 ] && [ $$f -eq 0 ]; then f=1; fi; echo "$${p:-0} passed, $$f failed"; exit $$st

# Line and branch coverage of the whole suite (the C suite and the Python tests, through the
# library of build/cov) with gcc's --coverage, in build/cov: the HTML report in build/coverage/,
# the per-file and per-directory table in build/coverage/summary.txt (tests/coverage; gcovr).
# The report is written even when a test fails; the target then fails.
coverage:
	@command -v gcovr >/dev/null || { echo "make coverage needs gcovr: apt-get install -y gcovr (or make deps)"; exit 1; }
	@find build/cov -name '*.gcda' -delete 2>/dev/null; true
	$(MAKE) BUILD=build/cov BIN=build/cov/bin COV=1 OPT=-O0 CUDA_GL=0 test; st=$$?; \
	    tests/coverage build/cov build/coverage || st=1; exit $$st

# Mutation testing (not in CI): each mutant of tests/mutate/mutants.txt applied in turn to a copy
# of the tree in build/mutate/tree, rebuilt there and tested; the table goes to
# build/mutate/results.txt (tests/mutate/results.txt is the committed copy). MUTANTS=id,id runs some.
mutate:
	tests/mutate/run $(if $(MUTANTS),--only $(MUTANTS))

# Fuzzing (libFuzzer with clang, ASan + UBSan): `make fuzz` builds build/fuzz/fuzz_*; `make
# fuzz-run FUZZ_SECONDS=60` runs each from a copy of its seed corpus (tests/fuzz/corpus/), seeded.
FUZZERS := load validate run asm plan jpeg frames pxbatch resolve
FUZZ_SECONDS ?= 60
fuzz: $(FUZZERS:%=build/fuzz/fuzz_%)
fuzz-list:
	@echo $(FUZZERS)
# fuzz_frames reads frames through tools/frames.c (the library built without FFmpeg)
build/fuzz/fuzz_frames: FUZZ_SRC := tools/frames.c
build/fuzz/fuzz_frames: tools/frames.c tools/frames.h
# float-cast-overflow: a float converted to an integer it does not fit (gcc's -fsanitize=undefined
# leaves it out; clang's includes it: named so that it stays on)
build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(LIB_SRC) $(wildcard isa/*.h isa/*.def vm/*.h vm/*.def assembler/*.h)
	@mkdir -p build/fuzz
	clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined,float-cast-overflow \
	    -fno-sanitize-recover=undefined,float-cast-overflow -ffp-contract=off \
	    -pthread $< $(FUZZ_SRC) $(LIB_SRC) -lpng -lz -lturbojpeg -ljansson -lm -o $@
# Regenerates the seed corpora (kept in git) from programs/ and the conformance generator.
fuzz-corpus: all $(BUILD)/tests/fuzz/make-corpus.o $(BUILD)/tests/conformance/cases.o $(BUILD)/tests/golden/golden.o
	$(CC) $(LDFLAGS) $(BUILD)/tests/fuzz/make-corpus.o $(BUILD)/tests/conformance/cases.o $(BUILD)/tests/golden/golden.o \
	    $(BUILD)/libpxvm.a $(LDLIBS) -o $(BUILD)/make-corpus
	$(BUILD)/make-corpus
	cp programs/*.pxs programs/*.json tests/fuzz/corpus/asm/ 2>/dev/null; rm -f tests/fuzz/corpus/asm/*.json
	cp programs/*.json docs/plans/*.json tests/fuzz/corpus/plan/

fuzz-run: fuzz
	@fail=0; for f in $(FUZZERS); do rm -rf build/fuzz/corpus-$$f && mkdir -p build/fuzz/corpus-$$f && \
	    cp tests/fuzz/corpus/$$f/* build/fuzz/corpus-$$f/ && \
	    build/fuzz/fuzz_$$f -seed=1 -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 \
	        -artifact_prefix=build/fuzz/crash-$$f- build/fuzz/corpus-$$f > build/fuzz/$$f.log 2>&1; rc=$$?; \
	    if [ $$rc -eq 0 ]; then echo "ok   fuzz_$$f: $$(grep -E '^Done' build/fuzz/$$f.log)"; \
	    else fail=1; echo "FAIL fuzz_$$f (exit $$rc): $$(grep -E 'ERROR|SUMMARY|artifact' build/fuzz/$$f.log | head -3)"; fi; \
	done; exit $$fail

# The whole test suite under valgrind's memcheck (slow: minutes).
valgrind: all
	PXVM_BIN=$(BIN) valgrind --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite $(BIN)/pxtest

# The quick start: decode the bundled photo, foveate it, write the atlas and the tensor.
demo: all
	@mkdir -p out
	$(BIN)/pxrun programs/foveate273.pxi --in image=programs/data/chelsea.png \
	    --out atlas=out/atlas.png --npy atlas=out/patches.npy --time
	@echo "wrote out/atlas.png (17x17 grid of 16x16 patches) and out/patches.npy (273, 16, 16, 4)"

# The pictures of README.md and docs/ (checked in): a program image enlarged, and what it makes of the photo.
docs-images: all
	@mkdir -p docs/img
	$(BIN)/pxzoom programs/foveate273.pxi docs/img/foveate273-program-x8.png 8
	$(BIN)/pxzoom programs/dot_test.pxi docs/img/dot_test-program-x16.png 16
	$(BIN)/pxrun programs/foveate273.pxi --in image=programs/data/chelsea.png --out atlas=docs/img/atlas.png
	$(BIN)/pxrun programs/pyramid.pxi --in image=programs/data/chelsea.png --out image@2=docs/img/pyramid-level2.png
	for s in grid logpolar v1 aniso; do \
	    $(BIN)/pxasm --plan docs/plans/$$s-1804x1200.json -o build/plan-$$s.pxi \
	        --overlay programs/data/chelsea.png docs/img/plan-$$s.png > docs/img/plan-$$s.txt || exit 1; done
	$(BIN)/pxrun docs/plans/scanpath-logpolar.json --in image=programs/data/chelsea.png \
	    --overlay docs/img/scanpath.png > docs/img/scanpath.txt
	$(MAKE) video-data
	$(BIN)/pxasm docs/plans/frame-768x576.pxs -o build/frame-768x576.pxi
	$(BIN)/pxrun build/frame-768x576.pxi --frames build/data/vtest.avi --max-frames 31 --npy image=build/vf.npy
	$(BIN)/pxrun docs/plans/video-vtest.json --fixation 0.5,0.5 --frames build/data/vtest.avi --max-frames 31 \
	    --npy dirty=build/vd.npy --changed build/vc.npy --geometry atlas=build/vg.npy
	PYTHONPATH=python $(PYTHON) docs/policy_picture.py tests/data/photos/coffee-tall.png dynamic:max=50000 \
	    docs/img/policy-dynamic.png > docs/img/policy-dynamic.txt
	PXVM_BIN=$(BIN) PYTHONPATH=python $(PYTHON) docs/policy_picture.py native docs/img/policy-native.png \
	    tests/data/photos/rocket.jpg tests/data/photos/coffee-tall.png > docs/img/policy-native.txt
	PXVM_BIN=$(BIN) PYTHONPATH=python $(PYTHON) docs/policy_picture.py policies tests/data/photos/coffee-tall.png \
	    docs/img/policies.png > docs/img/policies.txt
	$(PYTHON) docs/video_picture.py build/vf.npy build/vd.npy build/vc.npy build/vg.npy docs/img/video.png > docs/img/video.txt

# make install PREFIX=/usr/local: the tools, the library (shared and static), the header, pkg-config
# and the Python package (for the python3 that runs make: PYTHON, PYTHONDIR), which finds the
# library through its own libpxvm.so.1, a link to the one installed ($(LIBDIR)); DESTDIR stages it
# all for a package. `make uninstall` (same PREFIX) removes exactly those files.
PREFIX  ?= /usr/local
DESTDIR ?=
LIBDIR  ?= $(PREFIX)/lib
PYTHONDIR ?= $(shell $(PYTHON) -c 'import sys; print("$(PREFIX)/lib/python3.%d/dist-packages" % sys.version_info[1])' 2>/dev/null)
USER_TOOLS := pxrun pxasm pxbatch pxzoom pxresize
PY_FILES  := $(notdir $(wildcard python/pxvm/*.py))
# the package's subpackages (as python/build_backend's PY_SUBPACKAGES)
PY_SUBPACKAGES := processors
# the shared library alone (what a pip build of python/ bundles when no library is installed)
lib: check-deps $(SHLIB)

install: all
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(BUILD)/libpxvm.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf libpxvm.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libpxvm.so.$(SOVERSION)
	ln -sf libpxvm.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libpxvm.so
	install -m 644 include/pxvm.h $(DESTDIR)$(PREFIX)/include/pxvm.h
	sed -e 's#@PREFIX@#$(PREFIX)#' -e 's#@LIBDIR@#$(LIBDIR)#' -e 's#@VERSION@#$(VERSION)#' \
	    -e 's#@PRIVATE_LIBS@#$(strip $(LDLIBS))#' api/pxvm.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/pxvm.pc
	install -m 755 $(USER_TOOLS:%=$(BIN)/%) $(DESTDIR)$(PREFIX)/bin/
	$(if $(PYTHONDIR),install -d $(DESTDIR)$(PYTHONDIR)/pxvm && install -m 644 $(PY_FILES:%=python/pxvm/%) $(DESTDIR)$(PYTHONDIR)/pxvm/ && \
	    ln -sf $(LIBDIR)/libpxvm.so.$(SOVERSION) $(DESTDIR)$(PYTHONDIR)/pxvm/libpxvm.so.$(SOVERSION) && \
	    install -d $(DESTDIR)$(PYTHONDIR)/pxvm/_programs && \
	    install -m 644 $(PROGRAMS) $(wildcard programs/*.json) $(DESTDIR)$(PYTHONDIR)/pxvm/_programs/ \
	    $(if $(filter 1,$(NATIVE)),&& install -m 755 $(NATIVE_SO) $(DESTDIR)$(PYTHONDIR)/pxvm/))
	$(if $(PYTHONDIR),$(foreach d,$(PY_SUBPACKAGES),install -d $(DESTDIR)$(PYTHONDIR)/pxvm/$(d) && \
	    install -m 644 $(wildcard python/pxvm/$(d)/*.py) $(DESTDIR)$(PYTHONDIR)/pxvm/$(d)/ &&) true)
	-$(if $(DESTDIR),,ldconfig)

uninstall:
	rm -f $(USER_TOOLS:%=$(DESTDIR)$(PREFIX)/bin/%) $(DESTDIR)$(PREFIX)/include/pxvm.h $(DESTDIR)$(LIBDIR)/pkgconfig/pxvm.pc \
	    $(DESTDIR)$(LIBDIR)/libpxvm.a $(DESTDIR)$(LIBDIR)/libpxvm.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libpxvm.so.$(SOVERSION) \
	    $(DESTDIR)$(LIBDIR)/libpxvm.so
	$(if $(PYTHONDIR),rm -rf $(PY_SUBPACKAGES:%=$(DESTDIR)$(PYTHONDIR)/pxvm/%))
	$(if $(PYTHONDIR),rm -f $(PY_FILES:%=$(DESTDIR)$(PYTHONDIR)/pxvm/%) $(DESTDIR)$(PYTHONDIR)/pxvm/libpxvm.so.$(SOVERSION) \
	    $(DESTDIR)$(PYTHONDIR)/pxvm/$(notdir $(NATIVE_SO)) && \
	    rm -rf $(DESTDIR)$(PYTHONDIR)/pxvm/__pycache__ $(DESTDIR)$(PYTHONDIR)/pxvm/_programs && { rmdir $(DESTDIR)$(PYTHONDIR)/pxvm 2>/dev/null || true; })
	-$(if $(DESTDIR),,ldconfig)

# What the build and every test need (the C and Python suites, tests/install-check's venvs, the
# fuzzers, the video tests' FFmpeg and MPI): `make deps` installs them, CI (.ci/run) calls it.
DEPS_PKGS := build-essential pkg-config libpng-dev libjansson-dev libturbojpeg0-dev libegl-dev libglew-dev \
             libavformat-dev libavcodec-dev libswscale-dev libopenmpi-dev openmpi-bin \
             python3-dev python3-numpy python3-pytest python3-torch python3-pil python3-skimage python3-venv clang libclang-rt-14-dev gcovr
APT_FLAGS ?=
SUDO     = $(if $(filter 0,$(shell id -u)),,sudo)
deps:
	$(SUDO) apt-get update $(APT_FLAGS)
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y $(APT_FLAGS) $(DEPS_PKGS)

clean:
	rm -rf build bin programs/*.pxi out $(NATIVE_SO)

.PHONY: video-data lib install uninstall all check-deps test goldens bench bench-deps fuzz fuzz-list fuzz-run fuzz-corpus valgrind asan asan-python coverage mutate demo docs-images deps clean
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
