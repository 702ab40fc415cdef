return { lease = -1 }
