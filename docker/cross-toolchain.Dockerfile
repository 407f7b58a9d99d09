# Cross compilers for a base made on another arch (a step of debian-manylinux.Dockerfile, rendered
# by factory/wheelfactory/images/base_image.py). Under QEMU user emulation a compile is ~10x slower than
# native; these are the suite's own {{host}} gcc and binutils targeting {{target}}, which the kernel
# runs natively inside this {{target}} image. The engine puts {{prefix}}/bin first on PATH, so that only
# what must run as the image's arch runs emulated (Python, the smoke test, the project's tests).
# Debian's cross packages cannot be co-installed with the native compiler (same file names, arch-all
# sysroot packages an amd64 package cannot depend on in a foreign-arch root), so: the libraries
# that are Multi-Arch: same are installed by dpkg as {{host_debian}}; the toolchain and its sysroot
# are unpacked under {{prefix}}; its private libraries are linked where the {{host}} loader looks.
RUN dpkg --add-architecture {{host_debian}} \
 && apt-get update -qq \
 && debs=/tmp/cross-debs && mkdir -p $debs/partial /tmp/cross-state && touch /tmp/cross-state/status \
 && gcc_major="$(gcc -dumpversion | cut -d. -f1)" \
 && apt-get install -y -qq --download-only --no-install-recommends -o APT::Architecture={{host_debian}} \
      -o Dir::State::status=/tmp/cross-state/status -o Dir::Cache::archives=$debs \
      "g++-$gcc_major-{{target}}" >/dev/null \
 && mkdir -p {{prefix}} && same="" && for deb in $debs/*.deb; do \
      if [ "$(dpkg-deb -f "$deb" Multi-Arch)" = same ] && [ "$(dpkg-deb -f "$deb" Architecture)" = {{host_debian}} ]; \
      then same="$same $deb"; else dpkg-deb -x "$deb" {{prefix}} || exit 1; fi; done \
 && dpkg -i $same >/dev/null \
 && for lib in {{prefix}}/usr/lib/{{host_triplet}}/*.so*; do \
      [ -e "/usr/lib/{{host_triplet}}/${lib##*/}" ] || ln -s "$lib" /usr/lib/{{host_triplet}}/; done \
 && ln -s {{prefix}}/usr/{{target}} /usr/{{target}} \
 && mkdir -p {{prefix}}/bin \
 && for tool in gcc g++; do ln -s "../usr/bin/{{target}}-$tool-$gcc_major" "{{prefix}}/bin/{{target}}-$tool"; done \
 && ln -s {{target}}-gcc {{prefix}}/bin/gcc && ln -s {{target}}-gcc {{prefix}}/bin/cc \
 && ln -s {{target}}-g++ {{prefix}}/bin/g++ && ln -s {{target}}-g++ {{prefix}}/bin/c++ \
 && echo {{host}} > {{prefix}}/runs-on \
 && {{prefix}}/bin/c++ --version | head -n1 \
 && printf '#include <vector>\nint main() { return std::vector<int>(2).size() - 2; }\n' > /tmp/cross-check.cc \
 && {{prefix}}/bin/c++ -O2 /tmp/cross-check.cc -o /tmp/cross-check && /tmp/cross-check \
 && rm /tmp/cross-check.cc /tmp/cross-check \
 && rm -rf $debs /tmp/cross-state /var/lib/apt/lists/*
