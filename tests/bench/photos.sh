#!/bin/sh
# Gathers the processor benchmark's photos (tests/bench/bench_processor.py) into build/photos:
# 35 real photos of 33 sizes, 100x130 to 5640x3172, PNG and JPEG, grey, grey+alpha, RGB, RGBA and
# palette, from Debian packages: opencv-doc (examples/data), mate-backgrounds, python3-skimage
# (data/), and the tree's own tests/data/photos and programs/data. A package not installed is
# fetched with `apt-get download` and unpacked with `dpkg -x` into build/photos-debs (nothing is
# installed). The folder is carriable to a machine without a registry (about 25 MB; printed).
#   sh tests/bench/photos.sh [DEST]        (DEST: build/photos)
set -eu
DEST=${1:-build/photos}
DEBS=build/photos-debs
mkdir -p "$DEST" "$DEBS"
root_of() { # the root under which package $1's /usr/share files are: / if installed, else its unpacked .deb
    if dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; then echo /; return; fi
    if [ ! -d "$DEBS/$1" ]; then
        (cd "$DEBS" && apt-get download "$1" >/dev/null 2>&1) || { echo "photos.sh: apt-get download $1 failed" >&2; exit 1; }
        dpkg -x "$DEBS/$1"_*.deb "$DEBS/$1"
        rm -f "$DEBS/$1"_*.deb
    fi
    echo "$DEBS/$1"
}
CV=$(root_of opencv-doc)/usr/share/doc/opencv-doc/examples/data
MATE=$(root_of mate-backgrounds)/usr/share/backgrounds/mate
SK=/usr/lib/python3/dist-packages/skimage/data
[ -d "$SK" ] || SK=$(root_of python3-skimage)/usr/lib/python3/dist-packages/skimage/data
for f in \
    "$CV/templ.png" "$CV/HappyFish.jpg" tests/data/photos/coffee-tall.png "$SK/green_palette.png" \
    "$CV/box.png" tests/data/photos/coins.png programs/data/chelsea.png "$CV/butterfly.jpg" \
    "$CV/home.jpg" "$SK/astronaut.png" "$CV/chicky_512.png" "$CV/fruits.jpg" "$CV/squirrel_cls.jpg" \
    "$CV/messi5.jpg" "$CV/imageTextN.png" "$CV/rubberwhale1.png" "$SK/coffee.png" \
    tests/data/photos/rocket.jpg "$CV/left01.jpg" "$SK/motorcycle_left.png" "$CV/leuvenA.jpg" \
    "$CV/starry_night.jpg" "$CV/graf1.png" "$CV/building.jpg" "$SK/hubble_deep_field.jpg" \
    "$CV/aloeL.jpg" "$MATE/nature/GreenMeadow.jpg" "$SK/retina.jpg" "$MATE/nature/FreshFlower.jpg" \
    "$MATE/nature/Dune.jpg" "$MATE/nature/Storm.jpg" "$MATE/abstract/Arc-Colors-Transparent-Wallpaper.png" \
    "$MATE/nature/LadyBird.jpg" "$MATE/nature/Wood.jpg" "$MATE/abstract/Elephants_5640x3172.jpg"; do
    [ -f "$f" ] || { echo "photos.sh: missing $f" >&2; exit 1; }
    cp "$f" "$DEST/"
done
echo "photos.sh: $(ls "$DEST" | wc -l) files, $(du -sh "$DEST" | cut -f1) in $DEST"
