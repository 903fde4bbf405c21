"""A cluster in migration as plain data: the two pools, what pods hold, node moves and fleet
waves."""
