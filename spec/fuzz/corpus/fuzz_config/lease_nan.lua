return { lease = 0/0 }
