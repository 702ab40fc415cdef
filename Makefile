# jobrunner - build, test, run, bench, install. One non-recursive Makefile.
PKG_CONFIG ?= pkg-config
LUA_PC     ?= lua5.4
LUA        ?= lua5.4
PKGS        = $(LUA_PC) sqlite3 libpq libevent
WERROR     ?= -Werror
PREFIX     ?= /usr/local
CC         ?= cc
CFLAGS     ?= -O2 -g
CFLAGS     += -std=c11 -Wall -Wextra -Wshadow -Wformat=2 -Wwrite-strings \
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

RUNTIME  = main commands master dbthread worker frame config script jrlib log err \
           util
BACKENDS = backend sqlite postgres
OBJS     = $(RUNTIME:%=$(BUILD)/runtime/%.o) $(BACKENDS:%=$(BUILD)/backends/%.o) \
           $(BUILD)/sqlite_sql.o $(BUILD)/postgres_sql.o

LIBOBJS  = $(filter-out $(BUILD)/runtime/main.o,$(OBJS))
CTESTS   = $(patsubst spec/c/%.c,$(BUILD)/spec/c/%,$(wildcard spec/c/test_*.c))

.PHONY: all run test asan bench install uninstall clean deps check-deps

all: check-deps jobrunner

# Debian packages: the build needs the -dev ones, the tests busted, cjson,
# sqlite3 and a PostgreSQL 15 server.
DEB_PKGS = pkg-config gcc make liblua5.4-dev lua5.4 libsqlite3-dev sqlite3 \
           libpq-dev libevent-dev lua-cjson lua-busted postgresql-15 \
           postgresql-client-15
deps:
	@missing=$$(for p in $(DEB_PKGS); do \
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

check-deps:
	@for m in $(PKGS); do $(PKG_CONFIG) --exists $$m || { \
	    echo "missing pkg-config module '$$m': run 'make deps' (Debian:" \
	         "liblua5.4-dev libsqlite3-dev libpq-dev libevent-dev)"; \
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

# Each schema file becomes one C string: const char jr_<engine>_sql[].
$(BUILD)/%_sql.c: backends/%.sql
	@mkdir -p $(dir $@)
	$(Q){ echo 'const char jr_$*_sql[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; \
	  echo ';'; } > $@

$(BUILD)/%_sql.o: $(BUILD)/%_sql.c
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-missing-variable-declarations \
	    -c -o $@ $<

# C tests: each spec/c/test_*.c is a program printing "N passed, N failed".
$(BUILD)/spec/c/%: spec/c/%.c $(LIBOBJS)
	@mkdir -p $(dir $@)
	@echo "CC $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJS) $(LDLIBS)

run: deps all
	./jobrunner run

ifdef SANITIZE
TEST_BIN = $(BUILD)/jobrunner
else
TEST_BIN = jobrunner
endif

test: deps check-deps $(TEST_BIN) $(CTESTS)
	$(Q)LUA=$(LUA) BUILD=$(BUILD) JOBRUNNER_BIN=$(CURDIR)/$(BUILD)/jobrunner ./spec/run

# Workers and the master exit through paths LeakSanitizer cannot see as
# clean (exec, _exit); leaks are checked by the C tests instead.
asan:
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	$(MAKE) SANITIZE=address,undefined test

clean:
	rm -rf build jobrunner

-include $(OBJS:.o=.d)
