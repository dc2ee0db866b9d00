# dtrain fetch end to end, against tests/fetch_server.py on 127.0.0.1 (a random free port) and
# small IDX archives generated here; the registry entries pointing at the server come from a
# test registry file with the archives' real checksums.
. tests/cli/lib.sh

PY=/usr/bin/python3
SRC=$TMP/src      # the files the server and the local sources hold
LOG=$TMP/server.log
SERVER_PID=
stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
    fi
    SERVER_PID=
}
trap 'stop_server; rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- fixtures: four small IDX archives (100 train, 20 test images), and a file too big for a
# 32 KiB filesystem
mkdir -p "$SRC"
$PY - "$SRC" <<'EOF'
import gzip, os, random, struct, sys
d = sys.argv[1]
rng = random.Random(7)
def idx(name, magic, dims, data):
    with gzip.open(os.path.join(d, name), "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", x) for x in dims) + data)
for split, n in (("train", 100), ("t10k", 20)):
    idx(split + "-images-idx3-ubyte.gz", 0x803, (n, 28, 28), bytes(rng.getrandbits(8) for _ in range(n * 784)))
    idx(split + "-labels-idx1-ubyte.gz", 0x801, (n,), bytes(rng.randrange(10) for _ in range(n)))
EOF

# ---- the server
$PY tests/fetch_server.py --root "$SRC" --port-file "$TMP/port" --log "$LOG" &
SERVER_PID=$!
i=0
while [ ! -s "$TMP/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
PORT=$(cat "$TMP/port" 2>/dev/null)
if [ -z "$PORT" ]; then
    fail "test server started" "no port after 5 s"
    finish
    exit 1
fi
URL=http://127.0.0.1:$PORT

# ---- the test registry: several datasets with the same files and different mirrors
REG=$TMP/registry.json
$PY - "$SRC" "$URL" "$REG" <<'EOF'
import gzip, hashlib, json, os, sys
src, url, out = sys.argv[1:]
names = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
         "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
def entry(name, keys=("size", "md5", "sha256", "content_sha256")):
    raw = open(os.path.join(src, name), "rb").read()
    full = {"name": name, "size": len(raw), "md5": hashlib.md5(raw).hexdigest(),
            "sha256": hashlib.sha256(raw).hexdigest(),
            "content_sha256": hashlib.sha256(gzip.decompress(raw)).hexdigest()}
    return {k: v for k, v in full.items() if k == "name" or k in keys}
def ds(name, mirrors, files=names[:1], keys=("size", "md5", "sha256", "content_sha256"), **kw):
    d = {"name": name, "format": "idx", "description": "test " + name,
         "mirrors": mirrors, "files": [entry(f, keys) for f in files]}
    d.update(kw)
    return d
u = url + "/"
datasets = [
    ds("tiny", [u + "normal/"], files=names),
    ds("tiny-resume", [u + "close-once/a/"]),
    ds("tiny-retry", [u + "close-once/b/"]),
    ds("tiny-corrupt", [u + "corrupt/"]),
    ds("tiny-fallback", [u + "404/", u + "normal/"]),
    ds("tiny-dead", [u + "404/", u + "500/"]),
    ds("tiny-refused", ["http://127.0.0.1:1/"]),
    ds("tiny-norange", [u + "norange/"]),
    ds("tiny-md5", [u + "normal/"], keys=("md5",)),
    ds("tiny-nosize", [u + "normal/"], keys=("md5",)),
    ds("tiny-redirect", [u + "redirect/"]),
    ds("tiny-stall", [u + "stall/"]),
    ds("tiny-slow", [u + "slow/"]),
    ds("tiny-endless", [u + "endless/"]),
    ds("tiny-drip", [u + "drip/"]),
    ds("tiny-endless-nosize", [u + "endless/"], keys=("md5",)),
    ds("tiny-nosum", [u + "normal/"], keys=("size",)),
    ds("tiny-system", [u + "404/"], files=names[:2], system_dir=os.path.join(os.path.dirname(src), "sys")),
]
json.dump({"datasets": datasets}, open(out, "w"), indent=1)
EOF
export DTRAIN_REGISTRY=$REG
unset DTRAIN_MIRROR DTRAIN_DATA
F=train-images-idx3-ubyte.gz
FAST="--retries 0 --retry-delay 0.01"
requests() { grep -c "$1" "$LOG"; }

# ---- a fresh download, then nothing to do
run "$DTRAIN" fetch tiny --dir "$TMP/d/tiny" $FAST
expect_rc "fresh download exits 0" 0
check "all four files in place" cmp "$SRC/$F" "$TMP/d/tiny/$F"
check "labels in place" cmp "$SRC/t10k-labels-idx1-ubyte.gz" "$TMP/d/tiny/t10k-labels-idx1-ubyte.gz"
expect_err "download says what matched" "verified \(SHA-256 matched\)"
check "no .part left behind" sh -c "! ls '$TMP/d/tiny' | grep -q part"
check "no progress bar when stderr is not a terminal" sh -c "! grep -q \"\$(printf '\r')\" '$TMP/err'"
before=$(wc -l <"$LOG")
run "$DTRAIN" fetch tiny --dir "$TMP/d/tiny"
expect_rc "second fetch exits 0" 0
expect_err "second fetch reports present" "already present; verified"
check "second fetch makes no request" test "$(wc -l <"$LOG")" -eq "$before"
run "$DTRAIN" fetch tiny --dir "$TMP/d/tiny" --force
expect_rc "--force exits 0" 0
check "--force downloads again" test "$(wc -l <"$LOG")" -eq $((before + 4))

# ---- the default directory is $DTRAIN_DATA/<name>
run env DTRAIN_DATA="$TMP/root" "$DTRAIN" fetch tiny-md5 --quiet
expect_rc "DTRAIN_DATA fetch exits 0" 0
check "DTRAIN_DATA/<name> used" test -f "$TMP/root/tiny-md5/$F"
check "--quiet prints nothing" test ! -s "$TMP/err"
(cd "$TMP" && "$DTRAIN" fetch tiny-md5 --quiet >/dev/null 2>&1)
check "default root is ./data" test -f "$TMP/data/tiny-md5/$F"

# ---- an interrupted download is resumed with a Range request
run "$DTRAIN" fetch tiny-resume --dir "$TMP/d/resume" $FAST
expect_rc "cut-off download exits 1" 1
expect_err "cut-off download explains" "tiny-resume|$F: download failed from every mirror: .*(transfer closed|Transferred a partial file)"
check "cut-off download keeps the .part" test -s "$TMP/d/resume/$F.part"
check "cut-off download leaves no final file" test ! -e "$TMP/d/resume/$F"
run "$DTRAIN" fetch tiny-resume --dir "$TMP/d/resume" $FAST
expect_rc "resumed download exits 0" 0
expect_err "resumed download says so" "resuming"
check "server saw a Range request" grep -q "close-once/a/$F range=bytes=[1-9][0-9]*-" "$LOG"
check "resumed file is whole" cmp "$SRC/$F" "$TMP/d/resume/$F"

# ---- the same within one run: retry with backoff resumes
run "$DTRAIN" fetch tiny-retry --dir "$TMP/d/retry" --retries 2 --retry-delay 0.05
expect_rc "retry in the same run exits 0" 0
expect_err "retry is announced" "retrying in 0.1 s"
check "retry asked for a range" grep -q "close-once/b/$F range=bytes=[1-9]" "$LOG"
check "retried file is whole" cmp "$SRC/$F" "$TMP/d/retry/$F"

# ---- a server that ignores Range: start over; a 416: start over
mkdir -p "$TMP/d/norange" "$TMP/d/416"
head -c 1000 "$SRC/$F" >"$TMP/d/norange/$F.part"
run "$DTRAIN" fetch tiny-norange --dir "$TMP/d/norange" $FAST
expect_rc "server ignoring Range: exits 0" 0
check "server ignoring Range: file is whole" cmp "$SRC/$F" "$TMP/d/norange/$F"
{ cat "$SRC/$F"; head -c 100 "$SRC/$F"; } >"$TMP/d/416/$F.part"
run "$DTRAIN" fetch tiny-nosize --dir "$TMP/d/416" $FAST
expect_rc "part longer than the file (416): exits 0" 0
check "416: file is whole" cmp "$SRC/$F" "$TMP/d/416/$F"

# ---- a complete .part from an earlier run is verified and kept, even offline
mkdir -p "$TMP/d/wholepart"
cp "$SRC/$F" "$TMP/d/wholepart/$F.part"
run "$DTRAIN" fetch tiny-corrupt --dir "$TMP/d/wholepart" --offline
expect_rc "complete .part kept offline" 0
expect_err "complete .part reported" "$F: completed earlier; verified \(SHA-256 matched\)"
cp "$SRC/$F" "$TMP/d/wholepart/$F.part"
rm "$TMP/d/wholepart/$F"
run "$DTRAIN" fetch tiny-nosize --dir "$TMP/d/wholepart" --offline
expect_rc "complete .part of unknown size kept" 0
check "complete .part renamed" test -f "$TMP/d/wholepart/$F" -a ! -e "$TMP/d/wholepart/$F.part"

# ---- a corrupted download is rejected and removed
run "$DTRAIN" fetch tiny-corrupt --dir "$TMP/d/corrupt" $FAST
expect_rc "corrupt download exits 3" 3
expect_err "corrupt: both checksums shown" "checksum mismatch: expected sha256 [0-9a-f]{64} .*found sha256 [0-9a-f]{64}"
expect_err "corrupt: names the URL" "corrupt/$F"
expect_err_lines "corrupt: one-line error" 2 # the "downloading" line and the error
check "corrupt: no final file" test ! -e "$TMP/d/corrupt/$F"
check "corrupt: no .part" test ! -e "$TMP/d/corrupt/$F.part"

# ---- mirrors: fall back, all fail, connection refused, redirects
run "$DTRAIN" fetch tiny-fallback --dir "$TMP/d/fallback" $FAST
expect_rc "404 then good mirror exits 0" 0
expect_err "404 is reported" "HTTP 404 from $URL/404/$F; trying the next mirror"
check "fallback file is whole" cmp "$SRC/$F" "$TMP/d/fallback/$F"
run "$DTRAIN" fetch tiny-dead --dir "$TMP/d/dead" --retries 1 --retry-delay 0.01
expect_rc "all mirrors failing exits 1" 1
expect_err "all mirrors: each URL and status" "download failed from every mirror: HTTP 404 from $URL/404/$F; HTTP 500 from $URL/500/$F"
check "5xx was retried" test "$(requests "/500/$F")" -eq 2
check "404 was not retried" test "$(requests "/404/$F")" -eq 2 # fallback test + this one
run "$DTRAIN" fetch tiny-refused --dir "$TMP/d/refused" $FAST
expect_rc "connection refused exits 1" 1
expect_err "connection refused explained" "127.0.0.1:1/$F: .*(Couldn't connect|Connection refused)"
expect_err "unreachable: says what to do next" "offline\? \`dtrain fetch tiny-refused --from FILE\` takes a copy you have, --mirror URL"
check "unreachable: no empty directory, no 0-byte .part left" test ! -e "$TMP/d/refused"
run "$DTRAIN" fetch tiny-redirect --dir "$TMP/d/redirect" $FAST
expect_rc "redirect followed" 0
check "redirected file is whole" cmp "$SRC/$F" "$TMP/d/redirect/$F"
run "$DTRAIN" fetch tiny-endless --dir "$TMP/d/endless" $FAST
expect_rc "an endless body exits 1" 1
expect_err "an endless body: cut at the published size" "sends more than the published [0-9]+ bytes"
check "an endless body: no oversized .part left" sh -c "! find '$TMP/d/endless' -name '*.part' -size +1000k | grep -q ."
run timeout 30 "$DTRAIN" fetch tiny-drip --dir "$TMP/d/drip" $FAST --deadline 2
expect_rc "a dripping body exits 1 (not a hang)" 1
expect_err "a dripping body: the deadline named" "not done within the 2 s deadline"
# a file with no published size: --max-size (default 512 MiB) caps it and sets its deadline
run timeout 60 "$DTRAIN" fetch tiny-endless-nosize --dir "$TMP/d/endless-nosize" $FAST --max-size 100000
expect_rc "an endless body of unknown size exits 1 (not a hang)" 1
expect_err "unknown size: the bounds said" "no published size: at most 100000 bytes, within 62 s \(--max-size, --deadline\)"
expect_err "unknown size: cut at --max-size" "endless/$F: sends more than 100000 bytes \(no size published; --max-size raises the limit\)"
check "unknown size: the .part holds no more than --max-size" sh -c "! find '$TMP/d/endless-nosize' -name '*.part' -size +100000c | grep -q ."
run timeout 60 "$DTRAIN" fetch tiny-endless-nosize --dir "$TMP/d/endless-nosize" $FAST --max-size 100000
expect_err "unknown size, again: a full .part is started over, not resumed past the cap" "downloading http.*endless/$F"
expect_err "unknown size, again: cut at --max-size" "sends more than 100000 bytes"
run "$DTRAIN" fetch tiny-nosize --dir "$TMP/d/nosize-default" $FAST --force
expect_rc "unknown size, default cap: a normal file downloads" 0
expect_err "unknown size, default cap: 512 MiB within a minute plus 50 KB/s" "no published size: at most 536870912 bytes, within 10797 s"
run "$DTRAIN" fetch tiny-nosize --max-size 1.5
expect_rc "bad --max-size exits 2" 2
run "$DTRAIN" fetch tiny-stall --dir "$TMP/d/stall" $FAST --stall-timeout 1
expect_rc "stalled transfer exits 1" 1
expect_err "stalled transfer explained" "too slow|timed out"

# ---- local sources: --mirror file://, DTRAIN_MIRROR, --from, --offline
run "$DTRAIN" fetch tiny-dead --dir "$TMP/d/filemirror" --mirror "file://$SRC/" $FAST
expect_rc "file:// mirror exits 0" 0
check "file:// mirror put the file" cmp "$SRC/$F" "$TMP/d/filemirror/$F"
run env DTRAIN_MIRROR="http://127.0.0.1:1/, file://$SRC" "$DTRAIN" fetch tiny-dead --dir "$TMP/d/envmirror" --offline $FAST
expect_rc "DTRAIN_MIRROR file:// works offline" 0
check "DTRAIN_MIRROR put the file" cmp "$SRC/$F" "$TMP/d/envmirror/$F"
run "$DTRAIN" fetch tiny --dir "$TMP/d/offline" --offline
expect_rc "offline without a local source exits 3" 3
expect_err "offline explains" "not available offline"
run "$DTRAIN" fetch tiny --dir "$TMP/d/from" --from "$SRC"
expect_rc "--from exits 0" 0
expect_err "--from says where from" "copied from $SRC/$F; verified"
check "--from copied all files" cmp "$SRC/t10k-images-idx3-ubyte.gz" "$TMP/d/from/t10k-images-idx3-ubyte.gz"
mkdir -p "$TMP/bad"
cp "$SRC/$F" "$TMP/bad/$F"
printf 'X' | dd of="$TMP/bad/$F" bs=1 seek=500 conv=notrunc 2>/dev/null
run "$DTRAIN" fetch tiny-md5 --dir "$TMP/d/frombad" --from "$TMP/bad"
expect_rc "--from a damaged file exits 3" 3
expect_err "--from damaged: both checksums" "checksum mismatch: expected md5 [0-9a-f]{32}, found md5 [0-9a-f]{32}"
check "--from damaged: nothing left" test ! -e "$TMP/d/frombad/$F" -a ! -e "$TMP/d/frombad/$F.part"
mkdir -p "$TMP/onlyone"
cp "$SRC/$F" "$TMP/onlyone/"
run "$DTRAIN" fetch tiny --dir "$TMP/d/frommissing" --from "$TMP/onlyone"
expect_rc "--from without the file exits 3" 3
expect_err "--from missing named" "$TMP/onlyone/train-labels-idx1-ubyte.gz: missing"

# ---- a local copy the registry does not know: --trust, --sha256, --from FILE
# Such a file was refused for good, and nothing could make --list stop calling it corrupt.
mkdir -p "$TMP/mine"
$PY - "$TMP/mine/my-copy.gz" <<'EOF'
import gzip, struct, sys
with gzip.open(sys.argv[1], "wb") as f:  # valid IDX, other pixels: not the registry's bytes
    f.write(struct.pack(">IIII", 0x803, 100, 28, 28) + bytes(range(256)) * 306 + bytes(64))
EOF
MINE_SHA=$(sha256sum "$TMP/mine/my-copy.gz" | cut -d' ' -f1)
run "$DTRAIN" fetch tiny-md5 --dir "$TMP/d/tiny-md5" --from "$TMP/mine/my-copy.gz"
expect_rc "--from FILE not the registry's: exit 3" 3
expect_err "...says how to vouch for it" "checksum mismatch: expected md5 .* \(a copy you vouch for: add --trust, or --sha256 HEX\)"
run "$DTRAIN" fetch tiny-md5 --dir "$TMP/d/tiny-md5" --from "$TMP/mine/my-copy.gz" --trust
expect_rc "--from FILE --trust: exit 0" 0
expect_err "...warns whose word it is" "checksum mismatch.*accepted on your word \(--trust\): SHA-256 $MINE_SHA recorded in $TMP/d/tiny-md5/$F.sha256"
check "...the copy in place" cmp "$TMP/mine/my-copy.gz" "$TMP/d/tiny-md5/$F"
check "...its record reads back with sha256sum -c" sh -c "cd '$TMP/d/tiny-md5' && sha256sum -c --status '$F.sha256'"
run "$DTRAIN" fetch tiny-md5 --dir "$TMP/d/tiny-md5" --verify
expect_rc "--verify a trusted file: exit 0" 0
expect_err "...says it is trusted, not the registry's" "$F: present; trusted \(its SHA-256 is the one recorded in $F.sha256"
before=$(wc -l <"$LOG")
run "$DTRAIN" fetch tiny-md5 --dir "$TMP/d/tiny-md5"
expect_rc "fetch again: the trusted file is kept" 0
expect_err "...already present" "already present; trusted"
check "...no network" test "$(wc -l <"$LOG")" -eq "$before"
run "$DTRAIN" fetch --list --dir "$TMP/d" --json
check "--list: a trusted dataset is 'trusted', not corrupt" $PY -c '
import json, sys
rows = {r["name"]: r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "dataset"}
assert rows["tiny-md5"]["status"] == "trusted", rows["tiny-md5"]
' "$TMP/out"
run env DTRAIN_DATA="$TMP/d" "$DTRAIN" fetch --list
expect_out "--list text: trusted" "^tiny-md5 +idx +.* trusted "
printf 'X' | dd of="$TMP/d/tiny-md5/$F" bs=1 seek=500 conv=notrunc 2>/dev/null
run "$DTRAIN" fetch tiny-md5 --dir "$TMP/d/tiny-md5" --verify
expect_rc "a trusted file changed afterwards: --verify exit 3" 3
run "$DTRAIN" fetch --list --dir "$TMP/d" --json
check "...and --list calls it corrupt" $PY -c '
import json, sys
rows = {r["name"]: r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "dataset"}
assert rows["tiny-md5"]["status"] == "corrupt", rows["tiny-md5"]
' "$TMP/out"
run "$DTRAIN" fetch tiny-md5 --dir "$TMP/d/sha" --from "$TMP/mine/my-copy.gz" --sha256 "$(echo "$MINE_SHA" | tr 0-9a-f 1-9a-f0)"
expect_rc "--sha256 that is not the file's: exit 3" 3
expect_err "...names both" "checksum mismatch: expected sha256 [0-9a-f]{64} \(--sha256\), found sha256 $MINE_SHA"
check "...nothing left" test ! -e "$TMP/d/sha/$F" -a ! -e "$TMP/d/sha/$F.part" -a ! -e "$TMP/d/sha/$F.sha256"
run "$DTRAIN" fetch tiny-md5 --dir "$TMP/d/sha" --from "$TMP/mine/my-copy.gz" --sha256 "$MINE_SHA"
expect_rc "--sha256 of the file: exit 0" 0
check "...recorded" grep -q "^$MINE_SHA  $F\$" "$TMP/d/sha/$F.sha256"
run "$DTRAIN" fetch tiny-md5 --dir "$TMP/d/sha" --from "$SRC/$F" --force
expect_rc "the registry's own copy over a trusted one: exit 0" 0
check "...the record goes" test ! -e "$TMP/d/sha/$F.sha256"
run "$DTRAIN" fetch tiny --dir "$TMP/d/x" --from "$SRC/$F"
expect_rc "--from FILE for a four-file dataset: exit 2" 2
expect_err "...says to give the directory" "is a file, but tiny has 4 files; give the directory"
run "$DTRAIN" fetch tiny-md5 --dir "$TMP/d/x" --trust
expect_rc "--trust without --from: exit 2" 2
run "$DTRAIN" fetch tiny-md5 --dir "$TMP/d/x" --sha256 abc
expect_rc "--sha256 not 64 hex digits: exit 2" 2
run "$DTRAIN" fetch tiny --dir "$TMP/d/x" --from "$SRC" --sha256 "$MINE_SHA"
expect_rc "--sha256 for a four-file dataset: exit 2" 2
rm -rf "$TMP/d/tiny-md5" # the --list checks below expect only their own datasets

# ---- system copies (a registry system_dir standing in for Debian's)
mkdir -p "$TMP/sys"
cp "$SRC/$F" "$SRC/train-labels-idx1-ubyte.gz" "$TMP/sys/"
run "$DTRAIN" fetch tiny-system --dir "$TMP/d/system" --offline
expect_rc "system copy used offline" 0
expect_err "system copy named" "copied from $TMP/sys/$F"
run "$DTRAIN" fetch tiny-system --dir "$TMP/d/nosystem" --offline --no-system-copies
expect_rc "--no-system-copies skips it" 3

# ---- --verify
run "$DTRAIN" fetch tiny --dir "$TMP/d/tiny" --verify
expect_rc "--verify good files exits 0" 0
expect_err "--verify reports all verified" "tiny: all 4 files verified"
printf 'X' | dd of="$TMP/d/tiny/$F" bs=1 seek=500 conv=notrunc 2>/dev/null
before=$(wc -l <"$LOG")
run "$DTRAIN" fetch tiny --dir "$TMP/d/tiny" --verify
expect_rc "--verify damaged file exits 3" 3
expect_err "--verify damaged: both checksums" "$F: checksum mismatch: expected sha256 [0-9a-f]{64} or md5 [0-9a-f]{32} or content-sha256"
check "--verify uses no network" test "$(wc -l <"$LOG")" -eq "$before"
rm "$TMP/d/tiny/t10k-labels-idx1-ubyte.gz"
run "$DTRAIN" fetch tiny --dir "$TMP/d/tiny" --verify
expect_rc "--verify two bad files exits 3" 3
expect_err "--verify counts failures" "tiny: 2 of 4 files failed verification: .*t10k-labels-idx1-ubyte.gz: missing"
run "$DTRAIN" fetch tiny --dir "$TMP/d/tiny" $FAST
expect_rc "damaged file fetched again" 0
expect_err "damaged file: warned" "warning: $F: checksum mismatch.*fetching it again"
check "damaged file replaced" cmp "$SRC/$F" "$TMP/d/tiny/$F"
run "$DTRAIN" fetch tiny-nosum --dir "$TMP/d/nosum" $FAST
expect_rc "no published checksum: exits 0" 0
expect_err "no published checksum: says so" "no published checksum, size/format checked only"

# ---- --json
run "$DTRAIN" fetch tiny --dir "$TMP/d/json" --json $FAST
expect_rc "--json exits 0" 0
check "--json: every line parses" $PY -c '
import json, sys
ev = [json.loads(l)["event"] for l in open(sys.argv[1])]
assert ev.count("file_start") == 4 and ev.count("file_done") == 4 and ev[-1] == "dataset_done", ev' "$TMP/out"
check "--json: file_done says what matched" grep -q '"event":"file_done".*"matched":"sha256"' "$TMP/out"
run "$DTRAIN" fetch tiny-corrupt --dir "$TMP/d/jsonerr" --json $FAST
check "--json: error event" grep -q '"event":"error".*"exit_code":3' "$TMP/out"
run "$DTRAIN" fetch --list --json --dir "$TMP/d"
check "--list --json parses" $PY -c '
import json, sys
d = {e["name"]: e for e in map(json.loads, open(sys.argv[1]))}
assert d["tiny"]["status"] == "verified" and d["tiny-dead"]["status"] == "missing", d["tiny"]
assert "mnist" in d and "cifar100" in d' "$TMP/out"

# ---- progress bar on a terminal (script(1) gives the command a pty)
if command -v script >/dev/null 2>&1; then
    script -qec "$DTRAIN fetch tiny-slow --dir $TMP/d/slow $FAST" /dev/null >"$TMP/tty" 2>&1
    check "terminal: progress bar drawn" grep -q "\[#*\.*\] .*%.*/s ETA" "$TMP/tty"
    check "terminal: file complete" cmp "$SRC/$F" "$TMP/d/slow/$F"
fi

# ---- --list
run env DTRAIN_DATA="$TMP/d" "$DTRAIN" fetch --list
expect_rc "--list exits 0" 0
expect_out "--list has a header" "^NAME +FORMAT +SIZE +STATUS"
expect_out "--list shows verified" "^tiny +idx +[0-9.]+ kB +verified"
expect_out "--list shows missing" "^tiny-dead +idx .* missing"
expect_out "--list shows built-ins" "^cifar10 +cifar10 +170.1 MB"

# ---- errors: names, options, registry files, directories
run "$DTRAIN" fetch no-such-set
expect_rc "unknown dataset exits 2" 2
expect_err "unknown dataset lists the known ones" "unknown dataset 'no-such-set' \(known: mnist, fashion-mnist, kmnist, cifar10, cifar100, tiny,"
expect_err_lines "unknown dataset: one line" 1
run "$DTRAIN" fetch
expect_rc "no dataset exits 2" 2
run "$DTRAIN" fetch tiny --retries many
expect_rc "bad --retries exits 2" 2
expect_err "bad --retries explained" "--retries expects a number from 0 to 100, got 'many'"
run "$DTRAIN" fetch tiny --bogus
expect_rc "unknown option exits 2" 2
expect_err "unknown option named" "unknown option '--bogus'"
run "$DTRAIN" fetch tiny --dir
expect_rc "option without value exits 2" 2
printf '{"datasets": [{"name": "x", "format": "idx", "files": [{"name": "a", "md5": "123"}]}]}' >"$TMP/badreg.json"
run "$DTRAIN" fetch x --registry "$TMP/badreg.json"
expect_rc "bad checksum in registry exits 2" 2
expect_err "bad registry checksum explained" "badreg.json: dataset \"x\": \"md5\" must be 32 hex digits"
printf '{"datasets": [{"name": "x", "format": "idx", "colour": 1, "files": []}]}' >"$TMP/badreg.json"
run "$DTRAIN" fetch x --registry "$TMP/badreg.json"
expect_err "unknown registry key explained" "unknown key \"colour\""
printf '{"datasets": [{"name": "../../etc", "format": "idx", "files": []}]}' >"$TMP/badreg.json"
run "$DTRAIN" fetch ../../etc --registry "$TMP/badreg.json"
expect_rc "a dataset name with .. exits 2" 2
expect_err "a dataset name with .. refused" "badreg.json: dataset \"../../etc\": \"name\" must be 1-64 letters"
printf '{"datasets": [' >"$TMP/badreg.json"
run "$DTRAIN" fetch x --registry "$TMP/badreg.json"
expect_rc "broken registry JSON exits 2" 2
expect_err "broken registry JSON names the file" "badreg.json"
run "$DTRAIN" fetch x --registry "$TMP/nonexistent.json"
expect_rc "missing registry exits 2" 2
mkfifo "$TMP/fiforeg.json"
run timeout 20 "$DTRAIN" fetch --list --registry "$TMP/fiforeg.json"
expect_rc "registry that is a FIFO exits 2 (not a hang)" 2
expect_err "registry FIFO explained" "registry file: .*fiforeg.json: is a FIFO \(named pipe\), not a regular file"
$PY -c 'import sys; open(sys.argv[1], "w").write("{\"datasets\": []}" + " " * (1 << 20))' "$TMP/bigreg.json"
run "$DTRAIN" fetch --list --registry "$TMP/bigreg.json"
expect_rc "registry over 1 MiB exits 2" 2
expect_err "registry over 1 MiB explained" "bigreg.json: larger than 1048576 bytes"
run timeout 20 "$DTRAIN" fetch --list --registry /dev/zero
expect_rc "registry /dev/zero exits 2 (not read forever)" 2
expect_err "registry /dev/zero explained" "/dev/zero: is a character device, not a regular file"
: >"$TMP/plainfile"
run "$DTRAIN" fetch tiny --dir "$TMP/plainfile/sub" $FAST
expect_rc "directory under a file exits 1" 1
expect_err "directory error named" "plainfile/sub: cannot create directory: Not a directory"
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$TMP/ro" && chmod 555 "$TMP/ro"
    run "$DTRAIN" fetch tiny --dir "$TMP/ro" $FAST
    expect_rc "unwritable directory exits 1" 1
    expect_err "unwritable directory explained" "ro: directory is not writable"
elif unshare -m true 2>/dev/null; then
    # root ignores permissions: a read-only filesystem and a full one, in a private mount namespace
    mkdir -p "$TMP/ro" "$TMP/full"
    run unshare -m sh -c "mount -t tmpfs -o ro,size=64k tmpfs '$TMP/ro' && exec '$DTRAIN' fetch tiny --dir '$TMP/ro' $FAST"
    expect_rc "read-only directory exits 1" 1
    expect_err "read-only directory explained" "ro: directory is not writable: Read-only file system"
    run unshare -m sh -c "mount -t tmpfs -o size=32k tmpfs '$TMP/full' && exec '$DTRAIN' fetch tiny --dir '$TMP/full/x' $FAST"
    expect_rc "disk full exits 1" 1
    expect_err "disk full explained" "$F.part: write failed: No space left on device"
fi

stop_server

# ---- the real thing: Debian's Fashion-MNIST package, offline
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    run "$DTRAIN" fetch fashion-mnist --offline --dir "$TMP/fm" --json
    expect_rc "fashion-mnist from the Debian package exits 0" 0
    expect_err "fashion-mnist: content checksum matched" "verified \(content SHA-256 matched"
    check "fashion-mnist: four content matches" test "$(grep -c '"matched":"content-sha256"' "$TMP/out")" -eq 4
    run "$DTRAIN" fetch fashion-mnist --verify --dir "$TMP/fm"
    expect_rc "fashion-mnist --verify exits 0" 0
fi

finish
