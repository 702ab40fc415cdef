-- require "jobrunner" as installed by LuaRocks: the producer module's
-- older name, the same table as require "jobrunner.client" (as
-- luaopen_jobrunner in runtime/client/luaclient.c does for `make install`).
return require "jobrunner.client"
