return {
  backend = "sqlite:x.db",,
}
