# wheelfactory-network: none
# A CPU variant's build image: the base as it is (compiler, Pythons, manylinux layout), labelled.
# Rendered by factory/wheelfactory/images/dockerfiles.py (render_image); toolkit layers live in build-<cuda|rocm>.Dockerfile.
FROM {{base}}
{{labels}}
