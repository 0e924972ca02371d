# Warren: one non-recursive Makefile. `make` builds everything, `make test` runs every test
# (as root), `make asan` runs the whole suite under ASan+UBSan, `make format-check` checks style.

CC        ?= gcc
BUILD     ?= build
SAN       ?=
WERROR    ?= 1
PYTEST    ?= /usr/bin/python3 -m pytest

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla \
        -Wimplicit-fallthrough -Wcast-align -Wno-missing-field-initializers -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN += -Werror
endif

BASE_CFLAGS := -std=gnu11 -D_GNU_SOURCE -g -O2 $(WARN) -fstack-protector-strong \
               -fstack-clash-protection -MMD -MP
# Test builds (TESTING=1: test.sh exports it) compile in the fault hooks the integration tests
# drive (WARREN_FAULT, WARREN_CRASH: src/runtime/runtime.h); other builds ignore those
# variables. Every object depends on $(CONFIG_STAMP), whose name carries the setting, so a build
# made with the other setting is rebuilt in full: `./run.sh` after `./test.sh` never ships the
# hooks.
TESTING   ?= 0
# The goals that run the integration tests build what they test as a test build.
ifneq ($(filter test integration quick compat asan,$(MAKECMDGOALS)),)
override TESTING := 1
endif
ifneq ($(filter sdk-ts console-test,$(MAKECMDGOALS)),)
override TESTING := 1
endif
ifeq ($(TESTING),1)
BASE_CFLAGS += -DWR_TESTING
endif
CONFIG_STAMP = $(BUILD)/.config-testing-$(TESTING)

ifeq ($(SAN),1)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else
SAN_FLAGS :=
BASE_CFLAGS += -D_FORTIFY_SOURCE=2
endif

# Host programs (daemon side): PIE, hardened, optionally sanitized.
HOST_CFLAGS  := $(BASE_CFLAGS) -fPIE $(SAN_FLAGS) $(CFLAGS)
HOST_LDFLAGS := -pie -Wl,-z,relro -Wl,-z,now $(SAN_FLAGS) $(LDFLAGS)
# Programs that run inside sandboxes (warren-init, the probe): static, no sanitizer runtime
# (ASan cannot link statically), since a sandbox's root has no libc of ours.
STATIC_CFLAGS  := $(BASE_CFLAGS) $(CFLAGS)
STATIC_LDFLAGS := -static $(LDFLAGS)

UTIL_SRC    := src/util/err.c src/util/log.c src/util/xalloc.c src/util/fs.c src/util/parse.c \
               src/util/buf.c src/util/b64.c src/util/strv.c src/util/inet.c \
               src/util/utf8.c src/util/walk.c src/util/metrics.c
PROTO_SRC   := src/proto/proto.c
RUNTIME_SRC := $(wildcard src/runtime/*.c)
CORE_SRC    := $(wildcard src/core/*.c)
STORE_SRC   := $(wildcard src/store/*.c)
API_SRC     := $(wildcard src/api/*.c)
IMG_SRC     := $(wildcard src/image/*.c)
DAEMON_SRC  := $(wildcard src/daemon/*.c)
# The daemon's egress services (DNS stub, L7 proxy, policy): libuv and util/ only.
NET_SRC     := $(wildcard src/net/*.c)
# The gateway role (--role gateway): HTTP and SQL only, no runtime, manager or local store.
GW_SRC      := $(wildcard src/gateway/*.c)
PQ_CFLAGS   := $(shell pkg-config --cflags libpq)
# llhttp ships as C sources in Debian's node-llhttp; they are compiled from there, not copied.
LLHTTP_DIR  := /usr/share/llhttp
LLHTTP_INC  := /usr/share/include/llhttp
LLHTTP_SRC  := $(LLHTTP_DIR)/api.c $(LLHTTP_DIR)/http.c $(LLHTTP_DIR)/llhttp.c
INIT_SRC    := $(wildcard src/init/*.c)
CLI_SRC     := $(wildcard src/cli/*.c)
# libwarren, the public C client (include/warren.h): src/lib/ and the few util/ files it uses,
# compiled position-independent with hidden visibility into one set of objects for both the
# shared and the static library; src/lib/libwarren.map exports warren_* only.
WLIB_SRC    := $(wildcard src/lib/*.c) src/util/err.c src/util/xalloc.c src/util/buf.c \
               src/util/b64.c
WLIB_OBJ    := $(patsubst %.c,$(BUILD)/pic/%.o,$(WLIB_SRC)) \
               $(patsubst $(LLHTTP_DIR)/%.c,$(BUILD)/pic/llhttp/%.o,$(LLHTTP_SRC))
WLIB_MAJOR  := 0
WLIB_VER    := 0.1.0
WLIB_A      := $(BUILD)/libwarren.a
# The same objects with their symbols as compiled, for the programs of this tree that also use
# libwarren's insides (the CLI's verbs not yet on the public API use its transport; the unit
# test): libwarren.a itself keeps only warren_* global.
WLIB_INT    := $(BUILD)/libwarren-int.a
WLIB_SO     := $(BUILD)/libwarren.so
WLIB_PC     := $(BUILD)/warren.pc
WLIB_LIBS   := -ljansson -lpthread
PREFIX      ?= /usr/local
LIBDIR      ?= $(PREFIX)/lib
ZYGOTE_SRC  := $(wildcard src/zygote/*.c)
PROBE_SRC   := tests/probe/probe.c
UNIT_SRC    := $(wildcard tests/unit/test_*.c)
FUZZ_SRC    := $(wildcard tests/fuzz/fuzz_*.c)

host_obj   = $(patsubst %.c,$(BUILD)/host/%.o,$(1))
static_obj = $(patsubst %.c,$(BUILD)/static/%.o,$(1))

LIB_OBJ    := $(call host_obj,$(UTIL_SRC) $(PROTO_SRC) $(RUNTIME_SRC))
# util/, proto/ and runtime/ for the programs of this tree (not the public libwarren below).
LIB        := $(BUILD)/libwarren-base.a
# warren-init's body, linked into the programs that become a sandbox's PID 1 without an exec
# (warren-zygote, warren, the runtime benchmark; see src/init/entry.h).
INIT_LIB   := $(BUILD)/libwarren-init.a
# warren-init sets a gVisor sandbox's rlimits itself (runtime/rlimit.c: the ns backend's child
# sets them before it becomes warren-init).
INIT_LIB_OBJ := $(call host_obj,$(filter-out src/init/exe.c,$(INIT_SRC)) src/runtime/rlimit.c)
HOST_LIBS  := -lseccomp
LLHTTP_OBJ := $(patsubst $(LLHTTP_DIR)/%.c,$(BUILD)/llhttp/%.o,$(LLHTTP_SRC))
# The daemon's layers: core (sandbox manager, agent client), store (SQLite), api (HTTP), image
# (OCI archives and registries).
DLIB_OBJ   := $(call host_obj,$(CORE_SRC) $(STORE_SRC) $(API_SRC) $(IMG_SRC) $(NET_SRC) $(GW_SRC))
DLIB       := $(BUILD)/libwarrend.a
# The kernel's network configuration (src/runtime/netslot.c, nft.c, conntrack.c): netlink.
NET_LIBS    := $(shell pkg-config --libs libmnl libnftnl libnetfilter_conntrack)
DAEMON_LIBS := -luv -ljansson -lyaml -lsqlite3 -lwslay -lcrypto -lz -lseccomp -larchive -lcurl -lpq $(NET_LIBS) \
               $(shell pkg-config --libs ldns)
DAEMON     := $(BUILD)/warrend

CLI        := $(BUILD)/warren
ZYGOTE     := $(BUILD)/warren-zygote
INIT       := $(BUILD)/warren-init
SHIM       := $(BUILD)/warren-shim
PROBE      := $(BUILD)/warren-probe
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
FUZZ_BINS  := $(patsubst tests/fuzz/%.c,$(BUILD)/tests/%,$(FUZZ_SRC))
IMAGE      := $(BUILD)/images/busybox
# The web console (console/, docs/console.md): Vite builds it into $(BUILD)/console, next to
# warrend, which serves it under /console/ (--console-dir). Its sources include the TypeScript
# SDK's, which it is compiled with.
CONSOLE    := $(BUILD)/console/index.html
CONSOLE_SRC := $(shell find console/src console/public -type f 2>/dev/null) console/index.html \
               console/vite.config.ts console/tsconfig.json console/package-lock.json \
               $(wildcard sdk/typescript/src/*.cts)

.PHONY: all test unit fuzz-replay integration compat asan fuzz format format-check check-layers clean image bench

all: $(DAEMON) $(CLI) $(WLIB_SO) $(WLIB_A) $(WLIB_PC) $(ZYGOTE) $(INIT) $(SHIM) $(PROBE) $(UNIT_BINS) $(FUZZ_BINS) $(IMAGE)/.done $(BUILD)/bench/sandbox_loop \
     $(BUILD)/bench/nft_update $(CONSOLE)

$(CONFIG_STAMP):
	@mkdir -p $(dir $@)
	@rm -f $(BUILD)/.config-testing-*
	@touch $@

$(BUILD)/host/%.o: %.c $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(HOST_CFLAGS) -I$(LLHTTP_INC) $(PQ_CFLAGS) -c -o $@ $<

$(BUILD)/pic/%.o: %.c $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -fPIC -fvisibility=hidden $(SAN_FLAGS) $(CFLAGS) -I$(LLHTTP_INC) -c -o $@ $<

$(BUILD)/static/%.o: %.c $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(STATIC_CFLAGS) -c -o $@ $<

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(INIT_LIB): $(INIT_LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(DLIB): $(DLIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# Third-party sources: their own warnings are not ours to fix. llhttp 8 ships two parsers in one
# file; the strict one rejects chunk data not followed by CRLF, whitespace or other non-token
# bytes in header names and raw control or non-ASCII bytes in the request target, which the lax
# one accepts (request smuggling behind a proxy: docs/design/http.md).
$(BUILD)/llhttp/%.o: $(LLHTTP_DIR)/%.c Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -fPIE -w -DLLHTTP_STRICT_MODE=1 -I$(LLHTTP_INC) $(SAN_FLAGS) -c -o $@ $<

$(BUILD)/pic/llhttp/%.o: $(LLHTTP_DIR)/%.c Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -fPIC -fvisibility=hidden -w -DLLHTTP_STRICT_MODE=1 -I$(LLHTTP_INC) \
	    $(SAN_FLAGS) -c -o $@ $<

# libwarren: the static library carries llhttp and its util/ files, so a program links it and
# jansson alone (warren.pc says so). They are linked into one object whose hidden symbols are
# made local, so that a program's own xmalloc or llhttp cannot clash with ours: only warren_*
# stay global, as in the shared library.
$(WLIB_A): $(WLIB_OBJ)
	@mkdir -p $(dir $@)
	$(LD) -r -o $(BUILD)/pic/libwarren.o $^
	objcopy --localize-hidden $(BUILD)/pic/libwarren.o
	rm -f $@ && ar rcs $@ $(BUILD)/pic/libwarren.o

$(WLIB_INT): $(WLIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(WLIB_SO).$(WLIB_VER): $(WLIB_OBJ) src/lib/libwarren.map
	$(CC) -shared -Wl,-soname,libwarren.so.$(WLIB_MAJOR) -Wl,--version-script=src/lib/libwarren.map \
	    -Wl,--no-undefined -Wl,-z,relro -Wl,-z,now $(SAN_FLAGS) $(LDFLAGS) -o $@ $(WLIB_OBJ) $(WLIB_LIBS)

$(WLIB_SO): $(WLIB_SO).$(WLIB_VER)
	ln -sf libwarren.so.$(WLIB_VER) $(WLIB_SO).$(WLIB_MAJOR)
	ln -sf libwarren.so.$(WLIB_VER) $@

# build/warren.pc points into this tree (PKG_CONFIG_PATH=build); install-lib writes one for PREFIX.
define WLIB_PC_TEXT
prefix=$(1)
includedir=$(2)
libdir=$(3)

Name: warren
Description: C client of warrend, the Warren sandbox daemon
Version: $(WLIB_VER)
Requires.private: jansson
Libs: -L$${libdir} -lwarren
Libs.private: -lpthread
Cflags: -I$${includedir}
endef
$(WLIB_PC): Makefile
	@mkdir -p $(dir $@)
	$(file >$@,$(call WLIB_PC_TEXT,$(abspath .),$(abspath include),$(abspath $(BUILD))))
	@true

.PHONY: install-lib
install-lib: $(WLIB_SO) $(WLIB_A)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 0644 include/warren.h $(DESTDIR)$(PREFIX)/include/warren.h
	install -m 0755 $(WLIB_SO).$(WLIB_VER) $(DESTDIR)$(LIBDIR)/
	ln -sf libwarren.so.$(WLIB_VER) $(DESTDIR)$(LIBDIR)/libwarren.so.$(WLIB_MAJOR)
	ln -sf libwarren.so.$(WLIB_VER) $(DESTDIR)$(LIBDIR)/libwarren.so
	install -m 0644 $(WLIB_A) $(DESTDIR)$(LIBDIR)/
	$(file >$(BUILD)/warren-install.pc,$(call WLIB_PC_TEXT,$(PREFIX),$${prefix}/include,$(LIBDIR)))
	install -m 0644 $(BUILD)/warren-install.pc $(DESTDIR)$(LIBDIR)/pkgconfig/warren.pc

$(DAEMON): $(call host_obj,$(DAEMON_SRC)) $(DLIB) $(LIB) $(LLHTTP_OBJ)
	$(CC) $(HOST_LDFLAGS) -o $@ $^ $(DAEMON_LIBS)

# warren is linked static-pie: on a VM where every page fault and syscall is dear, the dynamic
# loader alone costs ~15% of a `warren run` (docs/benchmarks.md). Sanitizer builds link
# dynamically (ASan cannot be static).
ifeq ($(SAN),1)
CLI_LDFLAGS := $(HOST_LDFLAGS)
else
CLI_LDFLAGS := -static-pie -Wl,-z,relro -Wl,-z,now $(LDFLAGS)
endif
$(CLI): $(call host_obj,$(CLI_SRC)) $(INIT_LIB) $(WLIB_INT) $(LIB)
	$(CC) $(CLI_LDFLAGS) -o $@ $^ $(WLIB_LIBS) $(HOST_LIBS)

# warren-zygote, which clones sandboxes for warrend, is static for the same reason and one more:
# every clone copies its address space (src/runtime/zygote.c). Its segments start on 2 MiB
# boundaries so that it can move its code onto huge pages (src/zygote/hugetext.h).
$(ZYGOTE): $(call host_obj,$(ZYGOTE_SRC)) $(INIT_LIB) $(LIB)
	$(CC) $(CLI_LDFLAGS) -Wl,-z,max-page-size=0x200000 -o $@ $^ $(HOST_LIBS)

# warren-init is installed execute-only (0111, root-owned): see docs/design/isolation.md.
$(INIT): $(call static_obj,$(INIT_SRC) $(UTIL_SRC) $(PROTO_SRC) src/runtime/rlimit.c)
	$(CC) $(STATIC_LDFLAGS) -o $@ $^
	chmod 0111 $@

# warren-shim, the host-side parent of a gVisor sandbox (src/shim/main.c): static and small, one
# lives as long as each gvisor sandbox.
$(SHIM): $(call static_obj,src/shim/main.c)
	$(CC) $(STATIC_LDFLAGS) -o $@ $^

$(PROBE): $(call static_obj,$(PROBE_SRC))
	$(CC) $(STATIC_LDFLAGS) -o $@ $^

# libwarren's unit test reaches its insides (libwarren-int.a).
$(BUILD)/tests/test_libwarren: tests/unit/test_libwarren.c $(WLIB_INT) $(LIB) tests/unit/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(HOST_CFLAGS) -I$(LLHTTP_INC) $(HOST_LDFLAGS) -o $@ $< $(WLIB_INT) $(LIB) $(WLIB_LIBS)

$(BUILD)/tests/test_%: tests/unit/test_%.c $(DLIB) $(LIB) $(LLHTTP_OBJ) tests/unit/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(HOST_CFLAGS) -I$(LLHTTP_INC) $(HOST_LDFLAGS) -o $@ $< $(DLIB) $(LIB) $(LLHTTP_OBJ) $(DAEMON_LIBS)

# Each fuzz target has a main() that replays files (make test); `make fuzz` builds it for
# libFuzzer with clang. Targets link the daemon's libraries as the unit tests do.
$(BUILD)/tests/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(DLIB) $(LIB) $(LLHTTP_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(HOST_CFLAGS) -I$(LLHTTP_INC) $(HOST_LDFLAGS) -o $@ $< tests/fuzz/replay.c $(DLIB) \
	    $(LIB) $(LLHTTP_OBJ) $(DAEMON_LIBS)

# The test image: Debian's busybox-static and the probe, made locally (tests/mkimage.sh).
$(IMAGE)/.done: tests/mkimage.sh $(PROBE)
	sh tests/mkimage.sh $(IMAGE) $(PROBE)
	touch $@

image: $(IMAGE)/.done

unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "# $$t"; $$t; done

fuzz-replay: $(FUZZ_BINS)
	@set -e; for t in $(FUZZ_BINS); do n=$$(basename $$t); \
	  $$t tests/fuzz/corpus/$${n#fuzz_}/*; done

integration: all
	WARREN_BUILD=$(abspath $(BUILD)) $(PYTEST) -q -rs tests/integration

# The E2B and Novita SDKs, unchanged, against warrend (node's test runner; scripts/deps.sh test
# installs them into tests/compat/node_modules). One SDK at a time: each starts a daemon.
compat: all
	WARREN_BUILD=$(abspath $(BUILD)) node --test --test-concurrency=1 tests/compat/

# The TypeScript SDK (sdk/typescript, docs/sdk-typescript.md): npm ci when its lock changed
# (TypeScript is its only, dev, dependency), the tsc build, then its tests (node's test runner:
# each file starts a warrend of its own) and the npm pack test.
.PHONY: sdk-ts
sdk-ts: all
	cd sdk/typescript && if [ "$$(cat node_modules/.warren-lock 2>/dev/null)" != "$$(sha256sum <package-lock.json)" ]; then \
	  npm ci --no-audit --no-fund --ignore-scripts --loglevel=error && sha256sum <package-lock.json >node_modules/.warren-lock; fi
	cd sdk/typescript && node scripts/build.mjs
	cd sdk/typescript && WARREN_BUILD=$(abspath $(BUILD)) node --experimental-websocket --test --test-concurrency=1 test/*.test.mjs

# The console: npm ci when its lock changed (node_modules keyed by the lock's hash, as sdk-ts),
# TypeScript's check, then Vite's build (hashed asset names) into $(BUILD)/console.
$(CONSOLE): $(CONSOLE_SRC)
	cd console && if [ "$$(cat node_modules/.warren-lock 2>/dev/null)" != "$$(sha256sum <package-lock.json)" ]; then \
	  npm ci --no-audit --no-fund --ignore-scripts --loglevel=error && sha256sum <package-lock.json >node_modules/.warren-lock; fi
	cd console && node node_modules/typescript/bin/tsc --noEmit -p . && \
	  WARREN_CONSOLE_OUT=$(abspath $(BUILD))/console node node_modules/vite/bin/vite.js build --logLevel warn
	@test -f $@ && touch $@

# The console's end-to-end test: headless Chromium (Debian's `chromium`, driven by
# playwright-core) against a real warrend serving the built console, with real sandboxes; it
# writes the screenshots of docs/images/console/.
.PHONY: console-test
console-test: all
	cd console && WARREN_BUILD=$(abspath $(BUILD)) node --experimental-websocket --test --test-concurrency=1 test/*.test.mjs

# The Kubernetes manifests (deploy/kubernetes, docs/deploy.md): each overlay rendered with
# kubectl kustomize and checked offline against the API's schemas and Warren's rules
# (tests/deploy/validate.mjs; scripts/deps.sh test installs kubectl and its npm packages).
.PHONY: deploy-check
deploy-check:
	@test -d tests/deploy/node_modules || { echo "deploy-check: run scripts/deps.sh test first"; exit 1; }
	node tests/deploy/validate.mjs

# The suite without the tests marked slow (tests/integration/pytest.ini) and without the E2B
# SDKs: a few minutes.
.PHONY: quick
quick: all unit fuzz-replay
	WARREN_BUILD=$(abspath $(BUILD)) $(PYTEST) -q -m "not slow" tests/integration

test: all unit fuzz-replay integration
	$(MAKE) --no-print-directory compat
	$(MAKE) --no-print-directory sdk-ts
	$(MAKE) --no-print-directory console-test
	$(MAKE) --no-print-directory deploy-check

# Under ASan the modules with BACKENDS run on ns only (test_gvisor.py still drives the gvisor
# backend there): the plain pass runs them on both, and this keeps CI under 30 minutes.
asan:
	WARREN_TEST_BACKENDS=ns $(MAKE) BUILD=build-asan SAN=1 test

# The libraries are built with clang in $(FUZZ_BUILD) (instrumented for coverage), then each
# target runs FUZZ_SECONDS (60) from its corpus; new inputs go to $(FUZZ_BUILD)/corpus/, crashers
# to the current directory. FUZZ_TARGETS picks some (`make fuzz FUZZ_TARGETS=http`).
FUZZ_BUILD   := $(BUILD)-fuzz
FUZZ_TARGETS ?= $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRC))
FUZZ_LIBS    := $(FUZZ_BUILD)/libwarrend.a $(FUZZ_BUILD)/libwarren-base.a \
                $(patsubst $(BUILD)/%,$(FUZZ_BUILD)/%,$(LLHTTP_OBJ))
fuzz:
	$(MAKE) --no-print-directory CC=clang BUILD=$(FUZZ_BUILD) WERROR=0 \
	    SAN_FLAGS='-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer' $(FUZZ_LIBS)
	set -e; for n in $(FUZZ_TARGETS); do mkdir -p $(FUZZ_BUILD)/corpus/$$n; \
	  clang -std=gnu11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -I$(LLHTTP_INC) \
	    -o $(FUZZ_BUILD)/fuzz_$$n tests/fuzz/fuzz_$$n.c $(FUZZ_LIBS) $(DAEMON_LIBS); \
	  $(FUZZ_BUILD)/fuzz_$$n -max_total_time=$${FUZZ_SECONDS:-60} $(FUZZ_BUILD)/corpus/$$n \
	    tests/fuzz/corpus/$$n; done

$(BUILD)/bench/sandbox_loop: bench/sandbox_loop.c $(INIT_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(HOST_CFLAGS) $(HOST_LDFLAGS) -o $@ $< $(INIT_LIB) $(LIB) $(HOST_LIBS)

# The networking data path (policy updates at 1 and 10,000 sandboxes, per-packet cost), in
# private network namespaces: docs/benchmarks.md, "Networking data path".
$(BUILD)/bench/nft_update: bench/nft_update.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(HOST_CFLAGS) $(HOST_LDFLAGS) -o $@ $< $(LIB) $(NET_LIBS) -lpthread

bench: all $(BUILD)/bench/sandbox_loop
	sh bench/run.sh $(BUILD)

FORMAT_FILES := $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)

format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

# Every header compiles on its own (it includes what it uses).
.PHONY: check-headers check-calls
check-headers:
	@set -e; for h in $$(git ls-files 'src/*.h'); do \
	  $(CC) $(filter-out -MMD -MP,$(BASE_CFLAGS)) -I$(LLHTTP_INC) -fsyntax-only -include $$h \
	    -x c /dev/null || { echo "check-headers: $$h does not compile alone"; exit 1; }; done
	@$(CC) -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -include include/warren.h -x c \
	    /dev/null || { echo "check-headers: include/warren.h is not plain C99"; exit 1; }
	@! command -v g++ >/dev/null || g++ -std=c++11 -pedantic -Wall -Wextra -Werror -fsyntax-only \
	    -include include/warren.h -x c++ /dev/null || \
	    { echo "check-headers: include/warren.h does not compile as C++"; exit 1; }
	@echo "check-headers: ok"

# Calls that invite overflows or silent misparses are not used in src/: snprintf, memcpy with a
# checked length, wr_parse_* (src/util/parse.h) and strtok_r instead. The few that remain are
# bounded just above them and listed, as "path: code", in scripts/banned-calls.allow.
BANNED_CALLS := sprintf|vsprintf|strcpy|strncpy|strcat|strncat|stpcpy|alloca|atoi|atol|atoll|atof|gets|strtok|tmpnam|tempnam|mktemp
check-calls:
	@bad=$$(git grep -nE '(^|[^_[:alnum:]])($(BANNED_CALLS))\(' -- 'src/*.[ch]' | \
	  sed -E 's/^([^:]*):[0-9]+:[[:space:]]*/\1: /' | grep -vxF -f scripts/banned-calls.allow); \
	  [ -z "$$bad" ] || { echo "$$bad"; echo "check-calls: banned calls in src/"; exit 1; }
	@echo "check-calls: ok"

# Layering (docs/architecture.md): only src/runtime/ and the processes it runs (warren-init,
# warren-shim) make mount and namespace calls; only
# src/store/ includes sqlite3.h; src/proto/ depends on util/ alone; src/image/ (formats and the
# network) knows no HTTP server, SQL, manager or runtime.
check-layers:
	@! grep -nE '\b(mount|umount2|unshare|setns|pivot_root|clone3|fsopen|move_mount)\(' \
	    $$(git ls-files 'src/*.c' | grep -v '^src/runtime/' | grep -v '^src/init/' | grep -v '^src/shim/') || \
	    { echo "check-layers: kernel calls outside src/runtime/"; exit 1; }
	@! grep -ln 'sqlite3.h' $$(git ls-files 'src/*.[ch]' | grep -v '^src/store/') || \
	    { echo "check-layers: sqlite3.h outside src/store/"; exit 1; }
	@! grep -nE '#include "\.\./(runtime|cli|init|api|core|store)/' $$(git ls-files 'src/proto/*') || \
	    { echo "check-layers: proto/ depends on more than util/"; exit 1; }
	@! grep -nE '#include "\.\./runtime/' $$(git ls-files 'src/api/*' 'src/store/*') || \
	    { echo "check-layers: api/ or store/ reaches runtime/"; exit 1; }
	@! grep -nE '#include "\.\./store/|\bwr_store_[a-z_]+\(' $$(git ls-files 'src/api/*') || \
	    { echo "check-layers: api/ reaches store/ (go through core/)"; exit 1; }
	@! grep -nE '\b(WR_MSG_|WR_TAG_|wr_msg_|wr_agent_)|#include "\.\./(proto/proto|core/agent)\.h"' \
	    $$(git ls-files 'src/api/*') || \
	    { echo "check-layers: api/ speaks warren-init's protocol (core/files.h and core/manager.h do)"; exit 1; }
	@! grep -nE '#include "\.\./(api|store|core)/|uv\.h|sqlite3\.h|jansson\.h' $$(git ls-files 'src/runtime/*') || \
	    { echo "check-layers: runtime/ knows HTTP, SQL or the daemon"; exit 1; }
	@! grep -nE '#include "\.\./(api|store|core|runtime)/|uv\.h|sqlite3\.h' $$(git ls-files 'src/image/*') || \
	    { echo "check-layers: image/ knows the HTTP server, SQL or the daemon"; exit 1; }
	@! grep -nE 'jansson\.h|json_cleanup\.h' $$(git ls-files 'src/util/*.c' 'src/proto/*' 'src/runtime/*' 'src/init/*') || \
	    { echo "check-layers: util/, proto/, runtime/ or init/ needs jansson"; exit 1; }
	@! grep -nE '#include "\.\./(api|store|core|runtime|image|proto)/|jansson\.h|sqlite3\.h' $$(git ls-files 'src/net/*') || \
	    { echo "check-layers: net/ uses more than libuv and util/"; exit 1; }
	@! grep -nE '#include "\.\./(api|store|core|runtime|image|net|init|cli|daemon|zygote)/' $$(git ls-files 'src/lib/*') || \
	    { echo "check-layers: lib/ (libwarren) uses more than util/ and proto/"; exit 1; }
	@! grep -nE '#include' include/warren.h | grep -vE '<(stddef|stdint)\.h>' || \
	    { echo "check-layers: include/warren.h includes more than <stddef.h> and <stdint.h>"; exit 1; }
	@! grep -nE '#include "\.\./(runtime|core|store)/' $$(git ls-files 'src/gateway/*') /dev/null || \
	    { echo "check-layers: gateway/ reaches runtime/, core/ or store/ (it is HTTP and SQL only)"; exit 1; }
	@echo "check-layers: ok"

clean:
	rm -rf build build-asan build-fuzz build-asan-fuzz

-include $(shell find $(BUILD)/host $(BUILD)/pic $(BUILD)/static $(BUILD)/tests $(BUILD)/bench -name '*.d' -type f 2>/dev/null)
