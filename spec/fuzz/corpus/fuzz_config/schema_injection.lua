return { schema = "a;DROP TABLE jobs", backend = "postgresql://u:secret@h/db" }
