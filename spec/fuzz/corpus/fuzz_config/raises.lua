error("config exploded")
