# jobrunner - build, test, run, bench, install. One non-recursive Makefile.
PKG_CONFIG ?= pkg-config
LUA_PC     ?= lua5.4
LUA        ?= lua5.4
PKGS        = $(LUA_PC) sqlite3 libpq libevent libcurl libcrypto
WERROR     ?= -Werror
PREFIX     ?= /usr/local
CC         ?= cc
CFLAGS     ?= -O2 -g
CFLAGS     += -std=c11 -Wall -Wextra -Wshadow -Wformat=2 -Wwrite-strings -Wcast-qual \
              -Wstrict-prototypes -Wmissing-prototypes $(WERROR)
CPPFLAGS   += -D_POSIX_C_SOURCE=200809L -Iruntime -Ibackends -MMD -MP \
              $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
LDLIBS     += $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -lm -lpthread
VERSION     = 0.1.0
# make SANITIZE=address,undefined test
ifdef SANITIZE
CFLAGS     += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer \
              -fno-sanitize-recover=all
LDFLAGS    += -fsanitize=$(SANITIZE)
BUILD      ?= build/san
endif
BUILD      ?= build

ifeq ($(V),1)
Q =
else
Q = @
endif

# runtime/: one folder per layer, named from the bottom in runtime/LAYERS
# (which spec/layers_spec.lua reads too); backends/: the engines. Every .c
# of a folder is built: a new file needs no edit here. The producer
# module's Lua glue (LUAMOD_SRCS, below) is not part of the runner.
LAYERS  := $(filter-out backends,$(shell sed 's/\#.*//' runtime/LAYERS))
LUAMOD_SRCS = runtime/client/luaclient.c runtime/client/luacontrol.c \
              runtime/client/luaflow.c runtime/client/luaschedrt.c
RUNTIME_SRCS = $(filter-out $(LUAMOD_SRCS),\
                 $(foreach d,$(LAYERS),$(wildcard runtime/$(d)/*.c)))
BACKEND_SRCS = $(wildcard backends/*.c backends/*/*.c)
OBJS     = $(RUNTIME_SRCS:%.c=$(BUILD)/%.o) $(BACKEND_SRCS:%.c=$(BUILD)/%.o) \
           $(BUILD)/sqlite_sql.o $(BUILD)/postgres_sql.o $(BUILD)/dash.o

LIBOBJS  = $(filter-out $(BUILD)/runtime/cli/main.o,$(OBJS))
CTESTS   = $(patsubst spec/c/%.c,$(BUILD)/spec/c/%,$(wildcard spec/c/test_*.c))

.PHONY: all run test asan bench install uninstall clean deps check-deps

# all: and test: are defined once, at the end, after every part's variables.
.DEFAULT_GOAL := all

# Debian packages, in two lists. make run installs DEB_RUN_PKGS: what
# building the runner, its library and Lua module needs, and tzdata for
# the schedules' time zones, libcurl and ca-certificates for
# jobrunner.http (spec/debdeps_spec.lua checks that what the runner
# needs at run time is here and in debian/control). make test (and
# make deps, what CI calls) adds
# DEB_TEST_PKGS: busted and cjson for the specs, the sqlite3 shell, a
# PostgreSQL 15 server, clang (its build and the fuzzers), prometheus
# (promtool), chromium and nodejs (the browser spec, whose npm packages
# come with it), luarocks (spec/luarocks_spec.lua), DEB_DEB_PKGS and
# debootstrap (make deb-check's clean roots); openssl makes the TLS
# spec's certificates; strace counts the master's system calls
# (spec/master_idle_spec.lua). make deb installs DEB_RUN_PKGS and DEB_DEB_PKGS
# (deps-deb): with them, debian/control's Build-Depends (the same spec
# checks) and what dpkg-buildpackage and lintian need.
DEB_RUN_PKGS  = pkg-config gcc make liblua5.4-dev libsqlite3-dev \
                libpq-dev libevent-dev libcurl4-openssl-dev libssl-dev tzdata \
                ca-certificates
DEB_DEB_PKGS  = build-essential dpkg-dev debhelper fakeroot lintian
DEB_TEST_PKGS = lua5.4 lua-cjson lua-busted sqlite3 postgresql-15 \
                postgresql-client-15 clang libclang-rt-14-dev \
                prometheus chromium nodejs luarocks \
                $(DEB_DEB_PKGS) devscripts debootstrap openssl strace
DEB_PKGS      = $(DEB_RUN_PKGS) $(DEB_TEST_PKGS)

.PHONY: deps-run deps-test deps-debian deps-deb
deps: deps-test spec/browser/node_modules/.package-lock.json \
      spec/otlp/node_modules/.package-lock.json
deps-debian: deps-test

# the browser spec's driver (puppeteer-core, from npm's registry, pinned by
# the lockfile) without its own browser: it drives Debian's chromium. npm
# comes with some nodejs builds; Debian's own is the package npm.
spec/browser/node_modules/.package-lock.json: spec/browser/package.json \
                                             spec/browser/package-lock.json \
                                             | deps-test
	$(Q)command -v npm >/dev/null || { SUDO=; [ "$$(id -u)" = 0 ] || \
	    SUDO=sudo; DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install \
	    -y -q npm; }
	$(Q)cd spec/browser && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit \
	    --no-fund --loglevel=error >/dev/null

# the tracing spec's OTLP receiver: the official opentelemetry-proto
# definitions as @opentelemetry/otlp-transformer generates them (from npm's
# registry, pinned by the lockfile)
spec/otlp/node_modules/.package-lock.json: spec/otlp/package.json \
                                          spec/otlp/package-lock.json \
                                          | deps-test
	$(Q)command -v npm >/dev/null || { SUDO=; [ "$$(id -u)" = 0 ] || \
	    SUDO=sudo; DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install \
	    -y -q npm; }
	$(Q)cd spec/otlp && npm ci --no-audit --no-fund --loglevel=error \
	    >/dev/null

# $(call apt_install,PACKAGES): apt-get install those dpkg does not list
# as installed (none installed: no apt-get at all), with sudo when not
# root, apt-get update only if the first try fails.
define apt_install
	@missing=$$(for p in $(1); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
	        grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "installing:" $$missing; \
	    SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    $$SUDO apt-get install -y -q $$missing >/dev/null 2>&1 || \
	    { $$SUDO apt-get update -q >/dev/null && \
	      $$SUDO apt-get install -y -q $$missing; } || exit 1; \
	fi
endef

deps-run:
	$(call apt_install,$(DEB_RUN_PKGS))

deps-test: deps-run
	$(call apt_install,$(DEB_TEST_PKGS))

deps-deb: deps-run
	$(call apt_install,$(DEB_DEB_PKGS))

check-deps:
	@for m in $(PKGS); do $(PKG_CONFIG) --exists $$m || { \
	    echo "missing pkg-config module '$$m': run 'make deps-run' (Debian:" \
	         "liblua5.4-dev libsqlite3-dev libpq-dev libevent-dev" \
	         "libcurl4-openssl-dev libssl-dev)"; \
	    exit 1; }; done

# replaced by rename, so a running runner keeps its binary
jobrunner: $(BUILD)/jobrunner
	$(Q)cp $< $@.tmp && mv -f $@.tmp $@

$(BUILD)/jobrunner: $(OBJS)
	@echo "LD $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(OBJS) $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# Each engine's schema, backends/<engine>/schema.sql, becomes one C string:
# const char jr_<engine>_sql[].
$(BUILD)/%_sql.c: backends/%/schema.sql
	@mkdir -p $(dir $@)
	$(Q){ echo 'const char jr_$*_sql[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; \
	  echo ';'; } > $@

$(BUILD)/%_sql.o: $(BUILD)/%_sql.c
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-missing-variable-declarations \
	    -c -o $@ $<

# The dashboard (runtime/http/dash/) built into the binary: one C file of byte
# arrays, made by runtime/http/dash/embed.sh with od.
DASH_FILES = runtime/http/dash/index.html runtime/http/dash/app.js runtime/http/dash/style.css
$(BUILD)/dash.c: $(DASH_FILES) runtime/http/dash/embed.sh
	@mkdir -p $(dir $@)
	$(Q)sh runtime/http/dash/embed.sh $(DASH_FILES) > $@.tmp && mv -f $@.tmp $@

$(BUILD)/dash.o: $(BUILD)/dash.c
	@echo "CC $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# C tests: each spec/c/test_*.c is a program printing "N passed, N failed".
$(BUILD)/spec/c/%: spec/c/%.c $(LIBOBJS)
	@mkdir -p $(dir $@)
	@echo "CC $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJS) $(LDLIBS)

# make run builds with a job per core unless -j was given: a new user's
# first build (the runner, the library, the Lua module) is about twice as
# fast on two cores
RUN_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 1))
run: deps-run
	$(Q)$(MAKE) --no-print-directory $(RUN_JOBS) all
	./jobrunner run

ifdef SANITIZE
TEST_BIN = $(BUILD)/jobrunner
else
TEST_BIN = jobrunner
endif


# Workers and the master exit through paths LeakSanitizer cannot see as
# clean (exec, _exit); leaks are checked by the C tests instead. The
# Debian package spec builds and installs its own (unsanitized) package,
# the same in both runs: make test runs it, make asan does not. Nor does
# make asan run the kill tests of the ledger, the sequences and the waits
# (JR_SKIP_KILLS=1): their code runs in the other specs under the
# sanitizers, and their minutes of kills keep .ci/run in its time. Nor
# the five longest spec files (JR_SPEC_SKIP, a quarter of the suite's
# time), whose C paths the shorter specs run under the sanitizers too:
# redseq's 600-job retries of one sequence (sequences, seq39_red,
# bulk), fair_alone_red's drains of a fair queue alone and redfair's
# fair queues attacked (fair, fair_peek, fair_due, fair_after, fair_red,
# fair_burst_red, fair_name), seq_sqlite_red (sequences, seq39_red) and
# the dashboard in a browser (http, the API's specs). The jobs a spec
# pushes to have something to run (its helper Env:push; not the pushes it
# tests, which go through env:cli) are pushed by the plain build
# (JR_HELPER_BIN): a sanitized process takes about 22 ms more CPU to start
# than a plain one, and the suite pushes thousands of jobs.
ASAN_SPEC_SKIP = redseq fair_alone_red redfair seq_sqlite_red browser
asan: deps
	$(Q)$(MAKE) --no-print-directory SANITIZE= BUILD=build jobrunner
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 JR_SKIP_DEB=1 \
	JR_SKIP_KILLS=1 JR_SPEC_SKIP="$(ASAN_SPEC_SKIP)" \
	JR_HELPER_BIN=$(CURDIR)/jobrunner \
	$(MAKE) SANITIZE=address,undefined test

clean:
	rm -rf build jobrunner

-include $(OBJS:.o=.d)

# --- libjobrunner, the Lua module ------------------------------------------
# The producer library (runtime/client/jobrunner.h) is client.c over the backends,
# compiled again as PIC under $(BUILD)/pic. It needs sqlite3, libpq and
# liblua (to read config files), never libevent. Only jr_client_* is
# exported: a version script for the .so, objcopy for the .a. The Lua
# module "jobrunner.client" (also answering require "jobrunner") is the
# same objects plus luaclient.c and luaopts.c, without liblua.
OBJCOPY      ?= objcopy
SONAME        = libjobrunner.so.0
LIB_SRCS      = $(wildcard runtime/base/*.c runtime/config/*.c) \
                runtime/client/client.c runtime/client/clientread.c \
                runtime/client/clientwait.c runtime/client/clientsched.c \
                runtime/db/dbopts.c runtime/db/schedput.c \
                runtime/lua/hooks.c \
                runtime/lua/script.c runtime/lua/hopts.c \
                runtime/lua/hfair.c \
                runtime/lua/luabridge.c runtime/lua/json.c \
                runtime/lua/jsondec.c \
                $(BACKEND_SRCS)
LIB_PIC       = $(LIB_SRCS:%.c=$(BUILD)/pic/%.o) \
                $(BUILD)/pic/sqlite_sql.o $(BUILD)/pic/postgres_sql.o
LIB_LDLIBS    = $(shell $(PKG_CONFIG) --libs sqlite3 libpq libcrypto 2>/dev/null) -lm
LIB_LUALIBS   = $(shell $(PKG_CONFIG) --libs $(LUA_PC) 2>/dev/null)
LIB_PRIVATE   = $(LIB_LDLIBS) $(LIB_LUALIBS)

.PHONY: lib luamod spec-luamod

lib: $(BUILD)/libjobrunner.a $(BUILD)/libjobrunner.so $(BUILD)/jobrunner.pc

luamod: $(BUILD)/jobrunner.so

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $< (PIC)"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -c -o $@ $<

$(BUILD)/pic/%_sql.o: $(BUILD)/%_sql.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -Wno-missing-variable-declarations \
	    -c -o $@ $<

# One relocatable object whose internal symbols are made local, so that a
# program linking the archive only sees jr_client_*.
$(BUILD)/libjobrunner.a: $(LIB_PIC)
	@echo "AR $@"
	$(Q)$(CC) -r -nostdlib -o $(BUILD)/pic/libjobrunner.o $(LIB_PIC)
	$(Q)$(OBJCOPY) --wildcard --keep-global-symbol='jr_client_*' \
	    $(BUILD)/pic/libjobrunner.o
	$(Q)rm -f $@ && $(AR) rcs $@ $(BUILD)/pic/libjobrunner.o

$(BUILD)/libjobrunner.map:
	@mkdir -p $(dir $@)
	$(Q)echo 'JOBRUNNER_0 { global: jr_client_*; local: *; };' > $@

$(BUILD)/luaclient.map: Makefile
	@mkdir -p $(dir $@)
	$(Q)echo '{ global: luaopen_jobrunner; luaopen_jobrunner_client;' \
	    'local: *; };' > $@

$(BUILD)/$(SONAME): $(LIB_PIC) $(BUILD)/libjobrunner.map
	@echo "LD $@"
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) \
	    -Wl,--version-script=$(BUILD)/libjobrunner.map -Wl,--no-undefined \
	    -o $@ $(LIB_PIC) $(LIB_PRIVATE)

$(BUILD)/libjobrunner.so: $(BUILD)/$(SONAME)
	$(Q)ln -sf $(SONAME) $@

# The interpreter provides liblua's symbols: not linked against it.
LUAMOD_PIC    = $(LUAMOD_SRCS:%.c=$(BUILD)/pic/%.o) \
                $(BUILD)/pic/runtime/lua/luaopts.o

$(BUILD)/jobrunner.so: $(LIB_PIC) $(LUAMOD_PIC) $(BUILD)/luaclient.map
	@echo "LD $@"
	$(Q)$(CC) $(LDFLAGS) -shared \
	    -Wl,--version-script=$(BUILD)/luaclient.map -o $@ \
	    $(LIB_PIC) $(LUAMOD_PIC) $(LIB_LDLIBS)

# jobrunner.pc for the build tree's PREFIX (install writes its own).
PC_SED = -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
         -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
         -e 's|@LIBS_PRIVATE@|$(strip $(LIB_PRIVATE))|g'

$(BUILD)/jobrunner.pc: jobrunner.pc.in Makefile
	@mkdir -p $(dir $@)
	$(Q)sed $(PC_SED) jobrunner.pc.in > $@

# The specs load build/jobrunner.so (.busted's cpath) into lua5.4, which has
# no sanitizer runtime: other build dirs get a plain one built there too.
ifeq ($(BUILD),build)
SPEC_LUAMOD = build/jobrunner.so
else
SPEC_LUAMOD = spec-luamod
endif
spec-luamod:
	$(Q)$(MAKE) SANITIZE= BUILD=build build/jobrunner.so

-include $(LIB_PIC:.o=.d) $(LUAMOD_PIC:.o=.d)

# --- install ----------------------------------------------------------------
# make install PREFIX=/usr/local DESTDIR=/tmp/stage. The Lua module goes
# where this Lua looks: Debian's lua5.4 searches $(PREFIX)/lib/lua/5.4 for
# /usr/local, and its INSTALL_CMOD (/usr/lib/x86_64-linux-gnu/lua/5.4) for
# /usr. Override with LUA_CMOD=DIR.
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR       ?= $(PREFIX)/share/man
LUA_CMOD_PC   = $(shell $(PKG_CONFIG) --variable=INSTALL_CMOD $(LUA_PC) \
                  2>/dev/null)
LUA_CMOD_USR  = $(and $(filter /usr,$(PREFIX)),$(strip $(LUA_CMOD_PC)))
LUA_CMOD     ?= $(or $(LUA_CMOD_USR),$(PREFIX)/lib/lua/5.4)
INSTALL      ?= install

install: all
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) \
	    $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(LUA_CMOD)
	$(INSTALL) -m 755 jobrunner $(DESTDIR)$(BINDIR)/jobrunner
	$(INSTALL) -m 644 $(BUILD)/libjobrunner.a $(DESTDIR)$(LIBDIR)/
	$(INSTALL) -m 755 $(BUILD)/$(SONAME) $(DESTDIR)$(LIBDIR)/
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libjobrunner.so
	$(INSTALL) -m 644 runtime/client/jobrunner.h $(DESTDIR)$(INCLUDEDIR)/
	sed $(PC_SED) jobrunner.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/jobrunner.pc
	$(INSTALL) -m 755 $(BUILD)/jobrunner.so $(DESTDIR)$(LUA_CMOD)/
	$(INSTALL) -m 644 jobrunner.1 $(DESTDIR)$(MANDIR)/man1/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/jobrunner \
	    $(DESTDIR)$(LIBDIR)/libjobrunner.a \
	    $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libjobrunner.so \
	    $(DESTDIR)$(INCLUDEDIR)/jobrunner.h \
	    $(DESTDIR)$(PKGCONFIGDIR)/jobrunner.pc \
	    $(DESTDIR)$(LUA_CMOD)/jobrunner.so \
	    $(DESTDIR)$(MANDIR)/man1/jobrunner.1

# --- systemd units (make install) -------------------------------------------
# examples/systemd/: jobrunner.service, the template jobrunner@.service and
# the sysusers.d entry of their user, with ExecStart at $(BINDIR). Where
# systemd looks for a PREFIX: /usr takes systemd.pc's directories (Debian:
# /lib/systemd/system), any other $(PREFIX)/lib/systemd/system and
# $(PREFIX)/lib/sysusers.d. Override with SYSTEMDUNITDIR=, SYSUSERSDIR=.
SD_PC_VAR      = $(and $(filter /usr,$(PREFIX)),$(strip $(shell \
                   $(PKG_CONFIG) --variable=$(1) systemd 2>/dev/null)))
SYSTEMDUNITDIR ?= $(or $(call SD_PC_VAR,systemdsystemunitdir),\
                       $(PREFIX)/lib/systemd/system)
SYSUSERSDIR    ?= $(or $(call SD_PC_VAR,sysusersdir),$(PREFIX)/lib/sysusers.d)
SD_UNITS        = jobrunner.service jobrunner@.service

.PHONY: install-systemd uninstall-systemd
install: install-systemd
uninstall: uninstall-systemd

install-systemd:
	$(INSTALL) -d $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSUSERSDIR)
	for u in $(SD_UNITS); do \
	    sed 's|/usr/local/bin/jobrunner|$(BINDIR)/jobrunner|g' \
	        examples/systemd/$$u > $(DESTDIR)$(SYSTEMDUNITDIR)/$$u && \
	    chmod 644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$u || exit 1; done
	$(INSTALL) -m 644 examples/systemd/jobrunner.sysusers \
	    $(DESTDIR)$(SYSUSERSDIR)/jobrunner.conf

uninstall-systemd:
	rm -f $(SD_UNITS:%=$(DESTDIR)$(SYSTEMDUNITDIR)/%) \
	    $(DESTDIR)$(SYSUSERSDIR)/jobrunner.conf

# --- Debian packages (debian/) -----------------------------------------------
# make deb: copies the tree (the files git knows, tracked or new, without
# build/) to build/deb/jobrunner-$(VERSION), runs dpkg-buildpackage -b
# there (debian/rules calls make all and make install PREFIX=/usr) and
# leaves jobrunner, libjobrunner0, libjobrunner-dev, lua-jobrunner (and
# their -dbgsym) with the .changes in build/deb/, then runs lintian on the
# .changes: a warning or an error fails. The copy keeps this tree's build/
# and ../ untouched. It installs what the build needs first (deps-deb).
# spec/deb_spec.lua installs what it built.
DEB_DIR = build/deb
DEB_SRC = $(DEB_DIR)/jobrunner-$(VERSION)

.PHONY: deb
deb: deps-deb
	$(Q)rm -rf $(DEB_DIR) && mkdir -p $(DEB_SRC)
	$(Q)if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	    git ls-files -z --cached --others --exclude-standard | \
	        tar --null -T - --ignore-failed-read -cf - 2>/dev/null; \
	else \
	    tar --exclude=./build --exclude=./spec/browser/node_modules --exclude=./spec/otlp/node_modules -cf - .; \
	fi | tar -xf - -C $(DEB_SRC)
	$(Q)cd $(DEB_SRC) && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD \
	    -u SANITIZE -u CC -u CFLAGS dpkg-buildpackage -us -uc -b -jauto \
	    >../build.log 2>&1 || { tail -n 40 ../build.log; \
	    echo "make deb: dpkg-buildpackage failed (log: $(DEB_DIR)/build.log)"; \
	    exit 1; }
	$(Q)rm -rf $(DEB_SRC)
	$(Q)ls $(DEB_DIR)/*.deb
	$(Q)if command -v lintian >/dev/null; then \
	    lintian --fail-on error,warning $(DEB_DIR)/*.changes \
	        >$(DEB_DIR)/lintian.log 2>&1; rc=$$?; \
	    grep -v '^running with root privileges' $(DEB_DIR)/lintian.log; \
	    [ $$rc = 0 ] || { echo "make deb: lintian failed"; exit 1; }; \
	    echo "lintian: no error, no warning"; \
	else echo "make deb: no lintian (make deps-deb installs it)"; fi

# make deb-check (root; .ci/run runs it beside make test and make asan):
# .ci/deb-check builds the packages (into build/deb-check/debs, so that the
# Debian package spec's build/deb is its own), installs them with apt in a
# clean Debian 12 root made by debootstrap and runs a job with the
# installed unit's command line; then, in a second clean root, make run
# from a copy of this tree, the README's first job and make deb. It ends
# with "N passed, N failed". The bootstrapped root is cached in
# /var/cache/jobrunner-deb-check. make deb-check-deps installs what it
# needs on this machine (before anything runs beside it).
.PHONY: deb-check deb-check-deps
deb-check-deps: deps-deb
	$(call apt_install,debootstrap)

deb-check: deb-check-deps
	$(Q).ci/deb-check

# --- LuaRocks: jobrunner-0.1.0-1.rockspec ------------------------------------
# `luarocks make` runs `make rock` with LUA_INCDIR, JOBRUNNER_INCDIR and
# JOBRUNNER_LIBDIR (where it found the installed jobrunner.h and
# libjobrunner), then installs build/rock/client.so as jobrunner.client:
# the Lua glue and its small helpers, linked against that libjobrunner
# (rpath to it), exporting only the luaopen_ functions.
LUA_INCDIR       ?= $(patsubst -I%,%,$(filter -I%,$(shell $(PKG_CONFIG) \
                      --cflags $(LUA_PC) 2>/dev/null)))
JOBRUNNER_INCDIR ?= $(INCLUDEDIR)
JOBRUNNER_LIBDIR ?= $(LIBDIR)
ROCK_SRCS         = $(LUAMOD_SRCS) runtime/lua/luaopts.c runtime/lua/json.c \
                    runtime/lua/jsondec.c \
                    runtime/base/jsontext.c runtime/base/util.c runtime/base/esc.c \
                    runtime/base/err.c runtime/base/job.c runtime/base/trace.c \
                    runtime/base/keyring.c runtime/base/keyfile.c

# built every time: the library it links may have moved since the last
.PHONY: rock
rock: $(BUILD)/luaclient.map
	@mkdir -p build/rock
	@echo "LD build/rock/client.so (against $(JOBRUNNER_LIBDIR)/libjobrunner)"
	$(Q)$(CC) $(CFLAGS) -fPIC -shared -D_POSIX_C_SOURCE=200809L \
	    -I$(JOBRUNNER_INCDIR) -Iruntime -Ibackends \
	    $(if $(LUA_INCDIR),-I$(LUA_INCDIR)) -o build/rock/client.so $(ROCK_SRCS) \
	    -Wl,--version-script=$(BUILD)/luaclient.map \
	    -L$(JOBRUNNER_LIBDIR) -Wl,-rpath,$(JOBRUNNER_LIBDIR) -ljobrunner \
	    $(shell $(PKG_CONFIG) --libs libcrypto 2>/dev/null)

# --- bench -------------------------------------------------------------------
# make bench: bench/run measures push, drain, latency, idle cost, RSS and
# backlog scaling on SQLite and a throwaway PostgreSQL, prints one table and
# writes bench/results.json. BENCH_N=... scales it (see bench/run).
# bench/profile: the top functions of the master and of a worker.
BENCH_LIBS = $(shell $(PKG_CONFIG) --libs sqlite3 libpq libcrypto $(LUA_PC) 2>/dev/null) \
             -lm -lpthread

.PHONY: bench-tools profile bench-peers

bench: check-deps jobrunner bench-tools
	$(Q)BUILD=$(BUILD) LUA=$(LUA) JOBRUNNER_BIN=$${JOBRUNNER_BIN:-$(CURDIR)/jobrunner} ./bench/run

profile: check-deps jobrunner bench-tools
	$(Q)BUILD=$(BUILD) JOBRUNNER_BIN=$(CURDIR)/jobrunner ./bench/profile

# make bench-peers (optional, in neither test nor bench): bench/peers/run
# runs jobrunner and graphile-worker on one throwaway PostgreSQL, the no-op
# drain, the I/O-bound drain against build/bench/slowhttp and push-to-start
# latency, prints tables with the ratios and writes bench/peers/results.json
# (PEERS_ONLY=latency: the latency case alone). graphile-worker
# comes from npm's registry into bench/peers/node_modules, pinned by the
# lockfile; Node is Debian's nodejs (make deps).
bench-peers: check-deps jobrunner bench-tools \
             bench/peers/node_modules/.package-lock.json
	$(Q)BUILD=$(BUILD) JOBRUNNER_BIN=$(CURDIR)/jobrunner ./bench/peers/run

bench/peers/node_modules/.package-lock.json: bench/peers/package.json \
                                            bench/peers/package-lock.json
	$(Q)command -v node >/dev/null && command -v npm >/dev/null || \
	    $(MAKE) --no-print-directory deps-debian
	$(Q)command -v npm >/dev/null || { SUDO=; [ "$$(id -u)" = 0 ] || \
	    SUDO=sudo; DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install \
	    -y -q npm; }
	$(Q)cd bench/peers && npm ci --no-audit --no-fund --loglevel=error \
	    >/dev/null

bench-tools: $(BUILD)/bench/jrbench $(BUILD)/bench/benchsleep.so \
             $(BUILD)/bench/slowhttp

# a loopback HTTP server answering after a delay (the I/O-bound bench and
# the specs of jobrunner.http)
$(BUILD)/bench/slowhttp: bench/slowhttp.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(shell $(PKG_CONFIG) --libs libevent)

$(BUILD)/bench/jrbench: bench/jrbench.c $(BUILD)/libjobrunner.a
	@mkdir -p $(dir $@)
	@echo "CC $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(BUILD)/libjobrunner.a $(BENCH_LIBS)

$(BUILD)/bench/benchsleep.so: bench/benchsleep.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -shared -o $@ $<

# --- chaos and fuzzing -------------------------------------------------------
# make chaos: bench/chaos kills -9 the runner CHAOS_KILLS times per backend
# while it drains CHAOS_JOBS jobs, and prints per backend
# "backend=B jobs=N kills=K lost=L duplicated=D stuck=S max_dup=W
# max_held=H" (fails if lost or
# stuck, an orphan worker, or duplicates above its bound). The long run:
# make chaos CHAOS_JOBS=100000 CHAOS_KILLS=200. Then the workflow case,
# bench/chaosflow: CHAOS_FLOWS fan-out/fan-in flows (a root, CHAOS_FANOUT
# children, a join; one batch each with two callbacks) drained by three
# runners on PostgreSQL while one is killed CHAOS_KILLS times; prints
# "flows=F jobs=N kills=K lost=L early=E callbacks_bad=C waiting=W
# stuck=S" and fails unless all but F, N and K are 0. Then the steps case,
# bench/chaossteps: CHAOS_STEP_JOBS jobs of 20 steps (half durable) while
# workers and runners are killed CHAOS_STEP_KILLS times; prints the steps
# that ran again per kind and fails if a durable one ran after its call
# returned. spec/chaos_spec.lua runs the short ones in make test.
CHAOS_STEP_JOBS  ?= 2000
CHAOS_STEP_KILLS ?= 40
# Then the exactly-once ledger, bench/chaosledger: CHAOS_LEDGER_JOBS jobs (20000)
# each writing a ledger row and a count through jobrunner.sql while
# runners are killed every 0.7 s (PostgreSQL: three runners, a worker
# kill, a server restart); prints "backend=B ... rows=N counter=N
# duplicates=0 missing=0 reruns=X stuck=0" and fails unless rows and
# counter are N and the rest 0. Then the sequences' case, bench/chaosseq: CHAOS_SEQS sequences of CHAOS_SEQ_JOBS jobs, 5%
# of attempts failing, the same three runners and kills; prints
# "sequences=S jobs=N kills=K order=O overlaps=V lost=L stuck=T" and fails
# unless O, V, L and T are 0. Then the schedules' case, bench/chaossched:
# three runners on PostgreSQL follow schedules managed at run time (every
# second, catch_up all) for CHAOS_SCHED_SECONDS while one is killed
# CHAOS_KILLS times and the schedules are changed, removed and added
# mid-way; prints "schedules=S fires=F kills=K changes=C duplicated=D
# missing=M orphans=O" and fails unless D, M and O are 0. Then key rotation
# under load, bench/chaoscrypt:
# CHAOS_CRYPT_JOBS encrypted jobs (100000) drained by a runner while a
# producer pushes and `keys rotate` runs, then the old key removed; prints
# "backend=B jobs=N lost=L duplicated=D unreadable=U old_key_values=O
# stuck=S" per engine and fails unless all but N are 0
# (spec/encryption_spec.lua runs a few hundred jobs in make test).
# spec/chaos_spec.lua runs the short ones in make test.
CHAOS_JOBS  ?= 5000
CHAOS_CRYPT_JOBS ?= 100000
CHAOS_KILLS ?= 12
CHAOS_LEDGER_JOBS ?= 20000

.PHONY: chaos fuzz fuzz-build

chaos: all
	$(Q)CHAOS_JOBS=$(CHAOS_JOBS) CHAOS_KILLS=$(CHAOS_KILLS) \
	    JOBRUNNER_BIN=$(CURDIR)/jobrunner $(LUA) bench/chaos
	$(Q)CHAOS_KILLS=$(CHAOS_KILLS) JOBRUNNER_BIN=$(CURDIR)/jobrunner \
	    $(LUA) bench/chaosflow
	$(Q)CHAOS_STEP_JOBS=$(CHAOS_STEP_JOBS) \
	    CHAOS_STEP_KILLS=$(CHAOS_STEP_KILLS) \
	    JOBRUNNER_BIN=$(CURDIR)/jobrunner $(LUA) bench/chaossteps
	$(Q)CHAOS_LEDGER_JOBS=$(CHAOS_LEDGER_JOBS) \
	    JOBRUNNER_BIN=$(CURDIR)/jobrunner $(LUA) bench/chaosledger
	$(Q)CHAOS_KILLS=$(CHAOS_KILLS) JOBRUNNER_BIN=$(CURDIR)/jobrunner \
	    $(LUA) bench/chaosseq
	$(Q)CHAOS_KILLS=$(CHAOS_KILLS) JOBRUNNER_BIN=$(CURDIR)/jobrunner \
	    $(LUA) bench/chaossched
	$(Q)CHAOS_CRYPT_JOBS=$(CHAOS_CRYPT_JOBS) \
	    JOBRUNNER_BIN=$(CURDIR)/jobrunner $(LUA) bench/chaoscrypt

# make crash: bench/crash cuts the power under SQLite (a test VFS,
# bench/crashvfs.c, injected with LD_PRELOAD: never linked into jobrunner),
# injects I/O errors through it and kills PostgreSQL with -9, and counts
# what became of every acknowledged push (docs/reliability.md). The long
# run: make crash CRASH_SQLITE_CUTS=1000 CRASH_IO=200 CRASH_PG=100.
# spec/crash_spec.lua runs a short one in make test.
CRASH_SQLITE_CUTS ?= 100
CRASH_IO          ?= 20
CRASH_PG          ?= 10

.PHONY: crash crash-tools
crash: all crash-tools
	$(Q)CRASH_SQLITE_CUTS=$(CRASH_SQLITE_CUTS) CRASH_IO=$(CRASH_IO) \
	    CRASH_PG=$(CRASH_PG) CRASHVFS=$(CURDIR)/$(BUILD)/bench/crashvfs.so \
	    JOBRUNNER_BIN=$(CURDIR)/jobrunner $(LUA) bench/crash

crash-tools: $(BUILD)/bench/crashvfs.so

# spec/crash_spec.lua preloads build/bench/crashvfs.so into lua5.4 and the
# sqlite3 shell too: a plain one, whatever the build
ifeq ($(BUILD),build)
SPEC_CRASHVFS = build/bench/crashvfs.so
else
SPEC_CRASHVFS = spec-crashvfs
endif
.PHONY: spec-crashvfs
spec-crashvfs:
	$(Q)$(MAKE) SANITIZE= BUILD=build build/bench/crashvfs.so

$(BUILD)/bench/crashvfs.so: bench/crashvfs.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -shared -o $@ $< \
	    $(shell $(PKG_CONFIG) --libs sqlite3 2>/dev/null)

# Fuzz targets spec/fuzz/fuzz_*.c (frame codec, config loader, job
# decoding, payload decoder). make fuzz builds them with clang's libFuzzer,
# ASan and UBSan under build/fuzz (Debian: clang, libclang-rt-14-dev) and
# runs each for its share of FUZZ_SECONDS on its committed corpus; new
# inputs go to build/fuzz/new/TARGET, crashes to build/fuzz/TARGET-crash-*
# (replay one: build/fuzz/TARGET FILE). make test replays the corpora
# spec/fuzz/corpus/TARGET/ through the same targets built with $(CC) and
# spec/fuzz/replay.c: C tests build/spec/c/test_fuzz_*, one per file.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS  = fuzz_frame fuzz_config fuzz_job fuzz_json
FUZZ_DIR      = build/fuzz
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS   = -std=c11 -g -O1 -fno-omit-frame-pointer $(FUZZ_SAN)
FUZZ_CPPFLAGS = $(filter-out -MMD -MP,$(CPPFLAGS)) -Ispec/fuzz
FUZZ_SRCS     = $(patsubst $(BUILD)/%.o,%.c,$(filter $(BUILD)/runtime/% \
                  $(BUILD)/backends/%,$(LIBOBJS)))
FUZZ_OBJS     = $(FUZZ_SRCS:%.c=$(FUZZ_DIR)/obj/%.o) \
                $(FUZZ_DIR)/obj/sqlite_sql.o $(FUZZ_DIR)/obj/postgres_sql.o \
                $(FUZZ_DIR)/obj/dash.o
FUZZ_BINS     = $(FUZZ_TARGETS:%=$(FUZZ_DIR)/%)
FUZZ_REPLAYS  = $(FUZZ_TARGETS:fuzz_%=$(BUILD)/spec/c/test_fuzz_%)

fuzz: fuzz-build
	$(Q)per=$$(( $(FUZZ_SECONDS) / $(words $(FUZZ_TARGETS)) )); [ $$per -ge 1 ] || per=1; \
	failed=; \
	for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(FUZZ_DIR)/new/$$t; \
	    echo "FUZZ $$t for $$per s"; \
	    $(FUZZ_DIR)/$$t -max_total_time=$$per -timeout=10 \
	        -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
	        -artifact_prefix=$(FUZZ_DIR)/$$t- \
	        $(FUZZ_DIR)/new/$$t spec/fuzz/corpus/$$t \
	        >$(FUZZ_DIR)/$$t.log 2>&1 || failed="$$failed $$t"; \
	    grep -E '^(stat::number_of_executed_units|#[0-9]+ +DONE)' \
	        $(FUZZ_DIR)/$$t.log | tail -n 2; \
	done; \
	if [ -n "$$failed" ]; then \
	    echo "fuzz: failed:$$failed (see $(FUZZ_DIR)/TARGET.log and" \
	         "$(FUZZ_DIR)/TARGET-crash-*)"; exit 1; \
	fi; echo "fuzz: no crash in $(FUZZ_TARGETS)"

fuzz-build: check-deps $(FUZZ_BINS)

# built by pattern rules only: keep them, they are not intermediate
.SECONDARY: $(FUZZ_OBJS)

$(FUZZ_DIR)/obj/%_sql.o: $(BUILD)/%_sql.c
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) \
	    -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_DIR)/obj/dash.o: $(BUILD)/dash.c
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) \
	    -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $< (fuzz)"
	$(Q)$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) \
	    -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_DIR)/fuzz_%: spec/fuzz/fuzz_%.c spec/fuzz/fuzz.h $(FUZZ_OBJS)
	@echo "LD $@ (libFuzzer)"
	$(Q)$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer \
	    -o $@ $< $(FUZZ_OBJS) $(LDLIBS)

$(BUILD)/spec/c/test_fuzz_%: spec/fuzz/fuzz_%.c spec/fuzz/replay.c \
                             spec/fuzz/fuzz.h $(LIBOBJS)
	@mkdir -p $(dir $@)
	@echo "CC $< (corpus replay)"
	$(Q)$(CC) $(FUZZ_CPPFLAGS) $(CFLAGS) $(LDFLAGS) \
	    -DCORPUS_DIR='"spec/fuzz/corpus/fuzz_$*"' -o $@ \
	    $< spec/fuzz/replay.c $(LIBOBJS) $(LDLIBS)

# --- the two entry points ----------------------------------------------------
# make: the runner, the library and the Lua module. make test: the same plus
# the C tests and fuzz replays, then spec/run (both backends), without make's
# -j job server (the specs that run make start their own). deps installs
# only what dpkg says is missing: with everything there it runs no apt-get.
# a sanitized build leaves the top-level ./jobrunner (the one make run and
# make bench use) as it was: its binary is $(BUILD)/jobrunner
ifdef SANITIZE
all: check-deps $(BUILD)/jobrunner lib luamod
else
all: check-deps jobrunner lib luamod
endif

test: deps check-deps $(TEST_BIN) $(CTESTS) $(FUZZ_REPLAYS) $(SPEC_LUAMOD) \
      $(BUILD)/bench/slowhttp $(SPEC_CRASHVFS)
	$(Q)env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
	    LUA=$(LUA) BUILD=$(BUILD) JOBRUNNER_BIN=$(CURDIR)/$(BUILD)/jobrunner ./spec/run

# generated schema sources are kept, not rebuilt on every make
.SECONDARY: $(BUILD)/sqlite_sql.c $(BUILD)/postgres_sql.c $(BUILD)/dash.c
