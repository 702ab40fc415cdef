local t = {} for i = 1, 100 do t[i] = i end return { concurrency = { min = #t, max = #t } }
