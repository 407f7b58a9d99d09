"""Scale-out beyond one machine: a generated GitHub Actions workflow, a buildx bake file, and the
merge of several runners' output directories."""
