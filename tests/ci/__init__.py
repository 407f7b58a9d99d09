"""Generated CI: GitHub Actions, bake, merge, compat refresh."""
