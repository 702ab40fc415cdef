return { lease = math.huge }
