return "not a table"
