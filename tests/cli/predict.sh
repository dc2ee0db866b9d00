# `dtrain predict`: images in, classes out. A PNG folder made from an IDX fixture (in the
# folder's order, bench/make_folder.py --idx-out) gives, image for image, the classes and
# probabilities the IDX split gives, and the accuracy they imply is what `dtrain eval` reports.
# Bad input of every kind is one line and exit 3: corrupt, truncated, or a header declaring
# more pixels than data.max_pixels (refused before decoding). `make check-asan` runs this
# script against the ASan build, so predict's decode and forward paths are checked there.
. tests/cli/lib.sh

PY=/usr/bin/python3
$PY tests/fixtures/mkdata.py idx "$TMP/fix" --train 256 --test 64
$PY bench/make_folder.py "$TMP/fix" "$TMP/png" --idx-out "$TMP/ordered" >/dev/null
CFG=configs/fashion-convnet.cfg
run "$DTRAIN" train $CFG --threads 1 --set data.dir="$TMP/fix" --set train.epochs=2 \
    --set checkpoint.dir="$TMP/run" --quiet
expect_rc "a checkpoint to predict with" 0
CK="$TMP/run/last.safetensors"

run "$DTRAIN" predict "$CK" "$TMP/png/test" --json --top 3
expect_rc "predict a folder of PNGs: exit 0" 0
cp "$TMP/out" "$TMP/png.json"
run "$DTRAIN" predict "$CK" "$TMP/ordered" --split test --json --top 3
expect_rc "predict the IDX test split: exit 0" 0
cp "$TMP/out" "$TMP/idx.json"
run "$DTRAIN" eval "$CK" --data "$TMP/ordered" --json
cp "$TMP/out" "$TMP/eval.json"
check "PNG and IDX: the same top 3 with the same probabilities, image for image; eval's accuracy" $PY -c '
import json, sys
png = [json.loads(l) for l in open(sys.argv[1])]
idx = [json.loads(l) for l in open(sys.argv[2])]
ev = json.loads(open(sys.argv[3]).read().splitlines()[-1])
assert len(png) == len(idx) == 64, (len(png), len(idx))
for a, b in zip(png, idx):
    assert a["top"] == b["top"], (a, b)
    assert len(a["top"]) == 3 and a["top"][0]["probability"] >= a["top"][1]["probability"], a
    assert a["file"].endswith(".png") and "label" not in a and "label" in b, (a, b)
correct = sum(b["top"][0]["index"] == b["label"] for b in idx)
assert abs(correct / 64 - ev["test_accuracy"]) < 1e-6, (correct, ev["test_accuracy"])
assert set(png[0]["top"][0]) == {"class", "index", "probability"}, png[0]
' "$TMP/png.json" "$TMP/idx.json" "$TMP/eval.json"

first=$(ls "$TMP/png/test/0" | head -n 1)
run "$DTRAIN" predict "$CK" "$TMP/png/test/0/$first" --top 2
expect_rc "one file, text: exit 0" 0
expect_out "one file, text: the file, then classes with percentages" "^$TMP/png/test/0/$first  [^,]+ [0-9.]+%, [^,]+ [0-9.]+%$"

# ---- bad input ----
printf '\211PNG\r\n\032\nbroken' >"$TMP/bad.png"
run "$DTRAIN" predict "$CK" "$TMP/bad.png"
expect_rc "corrupt PNG: exit 3" 3
expect_err_lines "corrupt PNG: one line" 1
expect_err "corrupt PNG: names the file" "$TMP/bad.png"
cc -o "$TMP/mkjpeg" tests/fixtures/mkjpeg.c -ljpeg || exit 1
"$TMP/mkjpeg" "$TMP/ok.jpg" 200 200 1
run "$DTRAIN" predict "$CK" "$TMP/ok.jpg"
expect_rc "a JPEG: exit 0" 0
size=$(wc -c <"$TMP/ok.jpg")
head -c $((size * 2 / 3)) "$TMP/ok.jpg" >"$TMP/cut.jpg"
run "$DTRAIN" predict "$CK" "$TMP/ok.jpg" "$TMP/cut.jpg"
expect_rc "a truncated JPEG next to a good one: the good one predicted, exit 0" 0
check "...one prediction line, none for the truncated file (it once predicted on the grey-padded half)" \
    sh -c "test \"\$(wc -l <'$TMP/out')\" -eq 1 && ! grep -q cut.jpg '$TMP/out'"
expect_err_lines "a truncated JPEG: one error line" 1
expect_err "a truncated JPEG: names the file and what libjpeg said" "$TMP/cut.jpg: corrupt JPEG: Premature end of JPEG file"
run "$DTRAIN" predict "$CK" "$TMP/ok.jpg" "$TMP/cut.jpg" --strict
expect_rc "a truncated JPEG under --strict: exit 3" 3
"$TMP/mkjpeg" "$TMP/bomb.jpg" 28 28 1 declare=65500x65500
"$TMP/mkjpeg" "$TMP/bombp.jpg" 28 28 3 progressive declare=65500x65500
for f in bomb bombp; do
    # timeout: the baseline one took 17 s and 4.3 GB before the budget existed.
    run timeout 60 "$DTRAIN" predict "$CK" "$TMP/$f.jpg"
    expect_rc "$f.jpg declaring 65500x65500: exit 3" 3
    expect_err_lines "$f.jpg: one line" 1
    expect_err "$f.jpg: names the file, the declared size and the limit" "$TMP/$f.jpg: JPEG declares 65500x65500 pixels, more than data.max_pixels = 67108864"
done
run "$DTRAIN" predict "$CK" "$TMP/ok.jpg" --set data.max_pixels=39999
expect_rc "--set data.max_pixels below the image's 200x200: exit 3" 3
expect_err "...names the limit" "ok.jpg: JPEG declares 200x200 pixels, more than data.max_pixels = 39999"
esc=$(printf '\033')
cp "$TMP/bad.png" "$TMP/bad${esc}[2J.png"
run "$DTRAIN" predict "$CK" "$TMP/bad${esc}[2J.png"
expect_rc "a corrupt PNG named with an escape sequence: exit 3" 3
expect_err "...its name shown escaped" 'bad\\x1b\[2J.png: corrupt PNG'
check "...and no raw escape reaches the terminal" sh -c "! grep -q '$esc' '$TMP/err'"
mkdir "$TMP/empty"
run "$DTRAIN" predict "$CK" "$TMP/empty"
expect_rc "a directory without images: exit 3" 3
expect_err "a directory without images: says so" "no .png, .jpg or .jpeg image in it"
run "$DTRAIN" predict "$CK" "$TMP/nothing.png"
expect_rc "a missing file: exit 3" 3
mkfifo "$TMP/fifo.png"
run timeout 10 "$DTRAIN" predict "$CK" "$TMP/fifo.png"
expect_rc "a FIFO named .png: exit 3, no hang" 3
mkdir -p "$TMP/loop/a"
ln -s .. "$TMP/loop/a/up"
cp "$TMP/png/test/0/$first" "$TMP/loop/a/x.png"
run timeout 10 "$DTRAIN" predict "$CK" "$TMP/loop"
expect_rc "a symlink loop in a walked directory: not followed, exit 0" 0
check "a symlink loop: the one image, once" test "$(wc -l <"$TMP/out")" -eq 1
run "$DTRAIN" predict "$CK" "$TMP/png/test" --top 0
expect_rc "--top 0: exit 2" 2
run "$DTRAIN" predict "$CK"
expect_rc "no FILE: exit 2" 2
run "$DTRAIN" predict "$CK" "$TMP/ordered" --split dev
expect_rc "--split dev: exit 2" 2

# ---- one bad file among good ones: the rest are predicted, the bad one reported ----
# A corrupt PNG in a directory once aborted every prediction (exit 3); other extensions were
# skipped without a word.
mkdir "$TMP/mixed"
cp "$TMP/png/test/0/$first" "$TMP/mixed/a.png"
cp "$TMP/png/test/0/$first" "$TMP/mixed/c.png"
cp "$TMP/bad.png" "$TMP/mixed/b.png"
echo notes >"$TMP/mixed/readme.txt"
echo GIF89a >"$TMP/mixed/anim.GIF"
echo x >"$TMP/mixed/Makefile"
run "$DTRAIN" predict "$CK" "$TMP/mixed"
expect_rc "a directory with one corrupt PNG: exit 0" 0
check "...the two good files predicted, in order" test "$(cut -d' ' -f1 "$TMP/out" | tr '\n' ' ')" = "$TMP/mixed/a.png $TMP/mixed/c.png "
expect_err "...the bad one reported, naming it" "error: .*$TMP/mixed/b.png"
expect_err "...the skipped files counted, with their extensions and what is read" \
    "skipped 3 files with unsupported extensions \(\.gif, \.txt, no extension\); dtrain reads \.png, \.jpg, \.jpeg"
expect_err_lines "...one line for the bad file, one for the skipped ones" 2
run "$DTRAIN" predict "$CK" "$TMP/mixed" --json
expect_rc "--json with a bad file: exit 0" 0
check "--json: a prediction, an error record in the bad file's place, a prediction" $PY -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["file"] for r in rows] == [sys.argv[2] + n for n in ("/a.png", "/b.png", "/c.png")], rows
assert "top" in rows[0] and "top" in rows[2] and "top" not in rows[1], rows
assert set(rows[1]) == {"file", "error"} and rows[1]["error"].startswith(sys.argv[2] + "/b.png"), rows[1]
' "$TMP/out" "$TMP/mixed"
run "$DTRAIN" predict "$CK" "$TMP/mixed" --strict
expect_rc "--strict with a bad file: exit 3" 3
check "--strict: the good files are still predicted" test "$(wc -l <"$TMP/out")" -eq 2
expect_err "--strict: says how many could not be read" "1 of 3 inputs could not be read \(--strict\)"
run "$DTRAIN" predict "$CK" "$TMP/mixed/a.png" "$TMP/nothing.png"
expect_rc "a missing FILE beside a good one: exit 0" 0
expect_err "...the missing one reported" "$TMP/nothing.png: no such file or directory"
mkdir "$TMP/allbad"
cp "$TMP/bad.png" "$TMP/allbad/1.png"
cp "$TMP/bad.png" "$TMP/allbad/2.png"
run "$DTRAIN" predict "$CK" "$TMP/allbad"
expect_rc "only bad files: exit 3" 3
expect_err "...each reported, then that nothing could be read" "none of the 2 inputs could be read"
expect_err_lines "...three lines" 3

# ---- names cannot forge prediction lines ----
# A file name holding a newline and a fake "PATH  class p%" line was printed raw.
mkdir "$TMP/evil"
evil="$(printf 'x.png\nFORGED.png  9 100.00%%\ny')"
cp "$TMP/png/test/0/$first" "$TMP/evil/$evil.png"
run "$DTRAIN" predict "$CK" "$TMP/evil/$evil.png"
expect_rc "a FILE whose name holds a newline and a fake prediction: exit 0" 0
check "...one line, not two" test "$(wc -l <"$TMP/out")" -eq 1
esc="$(printf 'esc\033[2J')"
printf 'not an image' >"$TMP/evil/$esc.png"
run "$DTRAIN" predict "$CK" "$TMP/evil"
expect_rc "a name with a newline: exit 0" 0
check "...one line per file, none forged" test "$(wc -l <"$TMP/out")" -eq 1 -a "$(grep -c FORGED "$TMP/out")" -eq 1
expect_out "...the newline shown escaped" "^$TMP/evil/x\.png\\\\nFORGED\.png  9 100\.00%\\\\ny\.png  [^ ]+ [0-9.]+%$"
expect_err "...the bad file with an escape sequence in its name reported, escaped" 'esc\\x1b\[2J\.png'
check "...no control character but line ends on stdout or stderr" $PY -c '
import sys
for f in sys.argv[1:]:
    b = open(f, "rb").read()
    assert not any(c < 32 and c != 10 or c == 127 for c in b), (f, b)
' "$TMP/out" "$TMP/err"
run "$DTRAIN" predict "$CK" "$TMP/evil" --json
check "--json: the name comes back exactly" $PY -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["file"] for r in rows] == [sys.argv[2] + "/" + n + ".png" for n in sys.argv[3:]], rows
assert "error" in rows[0] and "top" in rows[1], rows
' "$TMP/out" "$TMP/evil" "$esc" "$evil"

# ---- a model with more outputs than a fixed array once held (256) ----
# The output count comes from the checkpoint; predict sized a stack array by the largest
# dataset class count and overflowed it (ASan: stack-buffer-overflow) for a wider head.
run "$DTRAIN" train $CFG --threads 1 --set data.dir="$TMP/fix" --set train.epochs=1 \
    --set model.layers.10.out_features=1000 --set checkpoint.dir="$TMP/wide" --quiet
expect_rc "a checkpoint whose last layer has 1000 outputs" 0
run "$DTRAIN" predict "$TMP/wide/last.safetensors" "$TMP/ordered" --split test --json --top 5
expect_rc "predict with 1000 outputs: exit 0" 0
check "...64 predictions of 5 classes each, indices below 1000" $PY -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 64 and all(len(r["top"]) == 5 for r in rows), len(rows)
assert all(0 <= t["index"] < 1000 for r in rows for t in r["top"])
' "$TMP/out"

finish
