"""`kztts synth` cloning a voice end to end as a user runs it, on the tiny Base checkpoint.

Dataflow: a 2.5 s 24 kHz mono 16-bit WAV written here (harmonics and noise) ->
    `kztts voice create` (ICL and x-vector only, made once) -> voice files, read back with
    tools/reference/voice_file.py; `kztts synth --greedy --frames N --dump-codes` with
    --ref-audio and with --voice, whose codes and audio are compared with each other, with
    the PyTorch reference (tools/reference/talker.py fed the voice's x-vector and codes),
    across options, and whose WAV is read back with python's wave module.

Checks: --ref-audio (ICL and --xvector-only) gives the codes and audio bytes of
`voice create` + `--voice`; the WAV is 24 kHz mono 16-bit of N*1920 samples (x-vector) or
of the new speech only (ICL: the official cut, total - int(n_ref / total * total_samples),
also for a frame count whose cut keeps the reference's last sample);
--stream to stdout (f32, s16, wav) is bit-identical to the offline file for both kinds, and
a WAV file holds the s16 output's samples;
--token-ids (of `kztts tokenize`) gives the codes of the text; without --layout a Base voice
uses the streaming layout (codes of --layout streaming, not those of non-streaming);
--language english changes them; --stream-text with an ICL voice (its transcript, and a
short one with a short and a long text) gives the codes and audio of the text at once;
greedy codes of `synth --voice` equal the reference's for 30 frames, x-vector and ICL,
both layouts; a q8_0 GGUF makes the same voice file bytes as the directory and speaks with
it; a FLAC of the same samples as a WAV makes the same voice, an
Ogg one a voice of the same length; the 1.7B-style checkpoint clones (--ref-audio == --voice,
ICL streaming codes == the reference's); bad
audio (missing, not audio, 0.5 s, silent, 61 s; 61 s passes with --max-ref-seconds 90), a
voice of another seed's checkpoint, a damaged voice file and --voice with a CustomVoice
model exit non-zero with one line and leave no output file.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import wave

import numpy as np

from testlib import check, finish, speechlike as speech_audio, write_wav as wav_file

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from reference import voice_file as vf  # noqa: E402

RATE, HOP = 24000, 1920
REF_TEXT = "This is what the reference recording says."
TEXT = "Hello world, this is a cloned voice."
FRAMES = 8


def write_wav(path, pcm, rate=RATE):
    return wav_file(path, pcm, rate)


def run(cmd, text=True):
    return subprocess.run(cmd, capture_output=True, text=text, timeout=600)


def speechlike(seconds, seed):
    return speech_audio(seconds, seed, RATE)


def read_codes(path):
    with open(path) as f:
        return [[int(v) for v in line.split()] for line in f if line.strip()]


def read_wav(path):
    """(rate, channels, sample width, samples) of a WAV file."""
    with wave.open(path, "rb") as w:
        return (w.getframerate(), w.getnchannels(), w.getsampwidth(),
                np.frombuffer(w.readframes(w.getnframes()), dtype="<i2"))


def icl_samples(n_ref, n_new):
    """Samples of an ICL output: the official cut of decode(reference + new codes)."""
    total = n_ref + n_new
    wav_len = total * HOP
    return wav_len - int(n_ref / max(total, 1) * wav_len)


class Synth:
    """Runs `kztts synth` into the work folder and returns (codes, wav path) or None."""

    def __init__(self, kz, work):
        self.kz, self.work, self.n = kz, work, 0

    def __call__(self, name, model, *args, frames=FRAMES, text=TEXT, fmt="wav"):
        self.n += 1
        out = os.path.join(self.work, f"s{self.n}.{fmt}")
        codes = os.path.join(self.work, f"s{self.n}.codes")
        extra = [text] if text is not None else []
        r = run([self.kz, "synth", "-m", model, *args, "--greedy", "--frames", str(frames),
                 "--threads", "2", "--quiet", "--dump-codes", codes, "-o", out, *extra])
        check(r.returncode == 0, f"{name}: exit {r.returncode}, {r.stderr.strip()}")
        if r.returncode != 0:
            return None, None
        c = read_codes(codes)
        check(len(c) == frames and all(len(f) == 16 for f in c),
              f"{name}: {len(c)} frames of codes (want {frames} x 16)")
        return c, out


def create(kz, model, wav, out, *kind):
    r = run([kz, "voice", "create", "-m", model, "--ref-audio", wav, *kind, "-o", out,
             "--threads", "2", "--quiet"])
    check(r.returncode == 0, f"voice create {model} {kind}: {r.stderr.strip()}")
    return r.returncode == 0


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def cut_keeping_a_sample(n_ref):
    """A frame count whose ICL cut keeps the reference's last sample (see icl_samples)."""
    return next(n for n in range(1, 400) if icl_samples(n_ref, n) == n * HOP + 1)


def test_ref_audio_vs_voice(synth, base, wav, voices):
    """--ref-audio equals voice create + --voice; the WAV is the right shape and length."""
    n_ref = vf.read(voices["icl"])["n_ref_frames"]
    kept = cut_keeping_a_sample(n_ref)
    for kind, voice, opts, frames in (
            ("icl", voices["icl"], ["--ref-text", REF_TEXT], FRAMES),
            ("icl", voices["icl"], ["--ref-text", REF_TEXT], kept),
            ("xvector", voices["xvector"], ["--xvector-only"], FRAMES)):
        c1, w1 = synth(f"{kind} --ref-audio", base, "--ref-audio", wav, *opts, frames=frames)
        c2, w2 = synth(f"{kind} --voice", base, "--voice", voice, frames=frames)
        if c1 is None or c2 is None:
            continue
        check(c1 == c2, f"{kind}: --ref-audio codes differ from --voice codes")
        check(file_bytes(w1) == file_bytes(w2), f"{kind}: --ref-audio audio differs from --voice")
        rate, ch, width, pcm = read_wav(w2)
        want = icl_samples(n_ref, frames) if kind == "icl" else frames * HOP
        check((rate, ch, width) == (RATE, 1, 2), f"{kind}: WAV is {rate} Hz, {ch} ch, {width} B")
        check(pcm.size == want, f"{kind}: {pcm.size} samples, want {want} (n_ref {n_ref})")
        check(np.abs(pcm.astype(np.int32)).max() > 0, f"{kind}: the audio is all zeros")
        print(f"ok   {kind}: --ref-audio == --voice ({frames} frames, {pcm.size} samples)",
              flush=True)


def test_stream(kz, base, voices, work):
    """--stream to stdout is bit-identical to the offline file (f32, s16; wav's data)."""
    kept = cut_keeping_a_sample(vf.read(voices["icl"])["n_ref_frames"])
    for kind, frames in (("icl", FRAMES), ("icl", kept), ("xvector", FRAMES)):
        for fmt in ("f32", "s16", "wav"):
            opts = [kz, "synth", "-m", base, "--voice", voices[kind], "--greedy", "--frames",
                    str(frames), "--threads", "2", "--quiet", "--format", fmt]
            off = os.path.join(work, f"offline.{fmt}")
            r1 = run(opts + ["-o", off, TEXT], text=False)
            r2 = run(opts + ["--stream", "-o", "-", TEXT], text=False)
            check(r1.returncode == 0 and r2.returncode == 0,
                  f"{kind} {fmt}: exits {r1.returncode} {r2.returncode} {r2.stderr[-200:]!r}")
            if r1.returncode or r2.returncode:
                continue
            a, b = file_bytes(off), r2.stdout
            if fmt == "wav":  # stdout's streaming header has its lengths at their maximum
                a, b = a[44:], b[44:]
                check(a == file_bytes(os.path.join(work, "offline.s16")),
                      f"{kind}: the WAV file's samples differ from the s16 output's")
            check(len(a) > 0 and a == b,
                  f"{kind} {fmt}: streamed {len(b)} bytes differ from offline {len(a)} bytes")
            print(f"ok   {kind} {frames} frames --stream {fmt}: {len(b)} bytes equal to offline",
                  flush=True)


def test_options(kz, synth, base, voices):
    """--token-ids, --layout and --language with a voice; the Base default layout."""
    r = run([kz, "tokenize", "-m", base, TEXT])
    ids = r.stdout.split()
    check(r.returncode == 0 and ids and all(i.isdigit() for i in ids),
          f"tokenize: {r.returncode} {r.stdout!r} {r.stderr!r}")
    for kind in ("icl", "xvector"):
        v = ["--voice", voices[kind]]
        default, _ = synth(f"{kind} default", base, *v)
        stream, _ = synth(f"{kind} streaming", base, *v, "--layout", "streaming")
        nonstream, _ = synth(f"{kind} non-streaming", base, *v, "--layout", "non-streaming")
        english, _ = synth(f"{kind} english", base, *v, "--language", "english")
        by_ids, _ = synth(f"{kind} --token-ids", base, *v, "--token-ids", ",".join(ids),
                          text=None)
        if None in (default, stream, nonstream, english, by_ids):
            continue
        check(default == stream, f"{kind}: a Base voice's default layout is not streaming")
        check(nonstream != stream, f"{kind}: --layout non-streaming gives the streaming codes")
        check(english != default, f"{kind}: --language english gives the auto codes")
        check(by_ids == default, f"{kind}: --token-ids of the text gives other codes")
        print(f"ok   {kind}: default == streaming != non-streaming; english differs; "
              f"--token-ids == text", flush=True)


def test_stream_text(kz, synth, base, wav, voices, work):
    """--stream-text with an ICL voice: the text on stdin in 3-byte pieces gives the codes and
    audio of the text as an argument, with the voice's transcript (longer than the reference's
    frames: the prompt holds one text token) and with a short one (the prompt holds the text
    up to the reference's length, or all of a short text)."""
    short = os.path.join(work, "icl_short.kzvoice")
    if not create(kz, base, wav, short, "--ref-text", "Ok."):
        return
    codes, out = os.path.join(work, "streamed.codes"), os.path.join(work, "streamed.wav")
    for name, voice in (("icl", voices["icl"]), ("icl, short transcript", short)):
        for text in (TEXT, "Hi."):
            want, want_wav = synth(f"{name} {text!r} at once", base, "--voice", voice, text=text)
            p = subprocess.Popen([kz, "synth", "-m", base, "--voice", voice, "--greedy",
                                  "--frames", str(FRAMES), "--threads", "2", "--quiet",
                                  "--stream-text", "--dump-codes", codes, "-o", out],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
            data = text.encode()
            for i in range(0, len(data), 3):
                p.stdin.write(data[i:i + 3])
                p.stdin.flush()
            _, err = p.communicate(timeout=600)  # closes stdin: the end of the text
            check(p.returncode == 0, f"{name} {text!r} --stream-text: exit {p.returncode}, "
                                     f"{err.decode().strip()}")
            if p.returncode or want is None:
                continue
            check(read_codes(codes) == want, f"{name} {text!r}: --stream-text gives other codes")
            check(file_bytes(out) == file_bytes(want_wav),
                  f"{name} {text!r}: --stream-text gives other audio")
            print(f"ok   {name}: --stream-text {text!r} == the text as an argument", flush=True)


def test_reference(synth, source, base, voices, work, kinds=("xvector", "icl"),
                   layouts=("streaming", "non_streaming")):
    """Greedy codes of synth --voice equal the PyTorch reference's for 30 frames."""
    import torch
    from reference import safetensors_io as st
    talker = os.path.join(source, "tools", "reference", "talker.py")
    for kind in kinds:
        v = vf.read(voices[kind])
        xvec = os.path.join(work, f"{kind}_xvector.safetensors")
        st.save(xvec, {"speaker_embedding": torch.from_numpy(np.asarray(v["xvector"],
                                                                        dtype=np.float32))})
        extra = []
        if kind == "icl":
            codes_txt = os.path.join(work, "ref_codes.txt")
            with open(codes_txt, "w") as f:
                f.write("".join(" ".join(str(int(c)) for c in row) + "\n" for row in v["codes"]))
            extra = ["--ref-codes", codes_txt, "--ref-text", v["text"]]
        for layout in layouts:
            golden = os.path.join(work, f"ref_{kind}_{layout}.safetensors")
            r = run([sys.executable, talker, "--model", base, "--text", TEXT, "--language",
                     "auto", "--layout", layout, "--frames", "30", "--speaker-embed", xvec,
                     "--out", golden, "--quiet", "--threads", "2", *extra])
            check(r.returncode == 0, f"reference {kind} {layout}: {r.stderr[-400:]}")
            if r.returncode:
                continue
            want = st.load(golden, names=["codes"])["codes"].tolist()
            got, _ = synth(f"{kind} {layout} vs reference", base, "--voice", voices[kind],
                           "--layout", layout.replace("_", "-"), frames=30)
            check(got == want, f"{kind} {layout}: codes differ from the reference's "
                               f"(first frame {got[:1] if got else None} vs {want[:1]})")
            print(f"ok   {os.path.basename(base)} {kind} {layout}: 30 frames equal to the "
                  "reference", flush=True)


def test_gguf(kz, synth, base, wav, voices, work):
    """A q8_0 GGUF clones: the same voice bytes as the directory, and it speaks with them."""
    gguf = os.path.join(work, "base_q8_0.gguf")
    r = run([kz, "quantize", "-m", base, "-o", gguf, "--type", "q8_0", "--quiet"])
    check(r.returncode == 0, f"quantize: {r.stderr.strip()}")
    if r.returncode:
        return
    for kind, opts in (("icl", ["--ref-text", REF_TEXT]), ("xvector", ["--xvector-only"])):
        path = os.path.join(work, f"gguf_{kind}.kzvoice")
        if create(kz, gguf, wav, path, *opts):
            check(file_bytes(path) == file_bytes(voices[kind]),
                  f"{kind}: the GGUF's voice file differs from the directory's")
        codes, out = synth(f"{kind} GGUF --voice", gguf, "--voice", voices[kind])
        if codes is not None:
            rate, ch, _, pcm = read_wav(out)
            n_ref = vf.read(voices[kind])["n_ref_frames"]
            want = icl_samples(n_ref, FRAMES) if kind == "icl" else FRAMES * HOP
            check(rate == RATE and ch == 1 and pcm.size == want,
                  f"{kind} GGUF: WAV {rate} Hz {ch} ch {pcm.size} samples (want {want})")
        print(f"ok   {kind}: the GGUF makes the same voice and speaks with it", flush=True)
    os.remove(gguf)


def test_1b7(kz, synth, source, base_1b7, wav, work):
    """The 1.7B-style checkpoint (x-vector of another size): --ref-audio == --voice, and an
    ICL voice's streaming-layout codes equal the reference's."""
    voices = {"icl": os.path.join(work, "icl_1b7.kzvoice")}
    if not create(kz, base_1b7, wav, voices["icl"], "--ref-text", REF_TEXT):
        return
    check(vf.read(voices["icl"])["enc_dim"] == 64, "the 1.7B-style voice's x-vector size")
    c1, w1 = synth("1b7 --ref-audio", base_1b7, "--ref-audio", wav, "--ref-text", REF_TEXT)
    c2, w2 = synth("1b7 --voice", base_1b7, "--voice", voices["icl"])
    check(c1 is not None and c1 == c2 and file_bytes(w1) == file_bytes(w2),
          "1b7: --ref-audio differs from --voice")
    test_reference(synth, source, base_1b7, voices, work, kinds=("icl",), layouts=("streaming",))


def test_ogg(kz, base, work, voices):
    """An Ogg Vorbis reference (lossy: a voice of its own) makes a voice of the same length."""
    codes = os.path.join(work, "flac_src.codes")
    ogg = os.path.join(work, "decoded.ogg")
    r = run([kz, "decode", "-m", base, "--codes", codes, "-o", ogg, "--quiet"])
    check(r.returncode == 0, f"decode to ogg: {r.stderr.strip()}")
    voice = os.path.join(work, "decoded_ogg.kzvoice")
    if r.returncode == 0 and create(kz, base, ogg, voice, "--ref-text", REF_TEXT):
        v, w = vf.read(voice), vf.read(os.path.join(work, "decoded_wav.kzvoice"))
        check(v["n_ref_frames"] == w["n_ref_frames"] and np.isfinite(v["xvector"]).all(),
              f"Ogg voice: {v['n_ref_frames']} frames (WAV: {w['n_ref_frames']})")
        print("ok   an Ogg reference makes a voice", flush=True)


def test_flac(kz, base, work, voices):
    """A FLAC holding a WAV's samples makes the WAV's voice (kztts decode writes both)."""
    codes = os.path.join(work, "flac_src.codes")
    check(run([kz, "encode", "-m", base, "--audio", os.path.join(work, "ref.wav"), "-o",
               codes]).returncode == 0, "encode for the FLAC case")
    made = {}
    for ext in ("wav", "flac"):
        audio = os.path.join(work, f"decoded.{ext}")
        r = run([kz, "decode", "-m", base, "--codes", codes, "-o", audio, "--quiet"])
        check(r.returncode == 0, f"decode to {ext}: {r.stderr.strip()}")
        voice = os.path.join(work, f"decoded_{ext}.kzvoice")
        if r.returncode == 0 and create(kz, base, audio, voice, "--ref-text", REF_TEXT):
            made[ext] = file_bytes(voice)
    check(len(made) == 2 and made["wav"] == made["flac"],
          "a FLAC of the WAV's samples makes another voice")
    print("ok   FLAC and WAV of the same samples make the same voice", flush=True)


def expect_failed(name, r, out_dir, *needles, code=None):
    err = r.stderr.strip()
    check(r.returncode != 0 and (code is None or r.returncode == code),
          f"{name}: exit {r.returncode} (want {code or 'non-zero'}), stderr {err!r}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line on stderr, got {err!r}")
    for n in needles:
        check(n in err, f"{name}: message {err!r} lacks {n!r}")
    left = os.listdir(out_dir)
    check(not left, f"{name}: left {left}")
    for f in left:
        os.remove(os.path.join(out_dir, f))
    print(f"ok   {name}: {err}", flush=True)


def test_errors(kz, source, base, cv, voices, work):
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "o.wav")
    codes = os.path.join(out_dir, "o.codes")
    common = ["--greedy", "--frames", "2", "--quiet", "-o", out, "--dump-codes", codes]
    missing = os.path.join(work, "missing.wav")
    notaudio = os.path.join(work, "notaudio.wav")
    with open(notaudio, "w") as f:
        f.write("This is a text file, not a recording.\n" * 20)
    short, silent, long_ = (os.path.join(work, n) for n in ("short.wav", "silent.wav",
                                                             "long.wav"))
    write_wav(short, speechlike(0.5, 3))
    write_wav(silent, np.zeros(2 * RATE))
    write_wav(long_, speechlike(61, 4))
    for name, audio, needle in (("missing audio", missing, "cannot open"),
                                ("not audio", notaudio, notaudio),
                                ("0.5 s of audio", short, "at least 1 s"),
                                ("silent audio", silent, "silent"),
                                ("61 s of audio", long_,
                                 "over the limit of 60 s (raise it with --max-ref-seconds")):
        for kind in (["--xvector-only"], ["--ref-text", REF_TEXT]):
            r = run([kz, "synth", "-m", base, "--ref-audio", audio, *kind, *common, TEXT])
            expect_failed(f"synth --ref-audio: {name} {kind[0]}", r, out_dir, audio, needle,
                          code=1)
        r = run([kz, "voice", "create", "-m", base, "--ref-audio", audio, "--xvector-only",
                 "-o", os.path.join(out_dir, "v.kzvoice")])
        expect_failed(f"voice create: {name}", r, out_dir, audio, needle, code=1)
    r = run([kz, "synth", "-m", base, "--ref-audio", long_, "--xvector-only",
             "--max-ref-seconds", "90", *common, TEXT])
    check(r.returncode == 0 and len(read_codes(codes)) == 2,
          f"61 s with --max-ref-seconds 90: {r.returncode} {r.stderr.strip()}")
    print("ok   61 s of audio with --max-ref-seconds 90", flush=True)
    for f in os.listdir(out_dir):
        os.remove(os.path.join(out_dir, f))

    other = os.path.join(work, "base_seed1")
    subprocess.run([sys.executable, os.path.join(source, "tools", "make_checkpoint.py"),
                    "--preset", "tiny", "--variant", "base", "--seed", "1", "--out", other],
                   check=True, capture_output=True)
    other_voice = os.path.join(work, "other.kzvoice")
    if create(kz, other, os.path.join(work, "ref.wav"), other_voice, "--xvector-only"):
        r = run([kz, "synth", "-m", base, "--voice", other_voice, *common, TEXT])
        expect_failed("synth --voice of another checkpoint", r, out_dir, other_voice,
                      f"{vf.fingerprint(other):016x}", f"{vf.fingerprint(base):016x}", code=2)
    damaged = bytearray(file_bytes(voices["icl"]))
    damaged[90] ^= 0x10
    bad = os.path.join(work, "damaged.kzvoice")
    with open(bad, "wb") as f:
        f.write(damaged)
    r = run([kz, "synth", "-m", base, "--voice", bad, *common, TEXT])
    expect_failed("synth --voice of a damaged file", r, out_dir, bad, "checksum", code=1)
    r = run([kz, "synth", "-m", cv, "--voice", voices["icl"], *common, TEXT])
    expect_failed("synth --voice with a CustomVoice model", r, out_dir, "custom_voice", code=2)


def test_bench_json(kz, base, voices, work):
    """bench --json with a voice whose path needs escaping is still one JSON object."""
    odd = os.path.join(work, 'a "quoted" \\ name.kzvoice')
    shutil.copyfile(voices["xvector"], odd)
    r = run([kz, "bench", "-m", base, "--voice", odd, "--frames", "2", "--repeat", "1",
             "--json", "-q"])
    check(r.returncode == 0, f"bench --voice: {r.stderr.strip()}")
    try:
        name = json.loads(r.stdout)["voice"]["name"]
    except (ValueError, KeyError) as e:
        name = f"unparsable: {e}"
    check(name == odd, f"bench --json voice name {name!r}, want {odd!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--tiny", required=True, help="the fixture's tiny checkpoint (tiny_base beside it)")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    kz, work = a.kztts, a.work
    base = os.path.join(os.path.dirname(a.tiny), "tiny_base")
    wav = os.path.join(work, "ref.wav")
    write_wav(wav, speechlike(2.5, 1))
    voices = {"icl": os.path.join(work, "icl.kzvoice"),
              "xvector": os.path.join(work, "xvector.kzvoice")}
    ok = (create(kz, base, wav, voices["icl"], "--ref-text", REF_TEXT) and
          create(kz, base, wav, voices["xvector"], "--xvector-only"))
    if ok:
        synth = Synth(kz, work)
        test_ref_audio_vs_voice(synth, base, wav, voices)
        test_stream(kz, base, voices, work)
        test_options(kz, synth, base, voices)
        test_stream_text(kz, synth, base, wav, voices, work)
        test_reference(synth, a.source, base, voices, work)
        test_gguf(kz, synth, base, wav, voices, work)
        test_flac(kz, base, work, voices)
        test_ogg(kz, base, work, voices)
        test_1b7(kz, synth, a.source, base + "_1b7", wav, work)
        test_bench_json(kz, base, voices, work)
        test_errors(kz, a.source, base, a.tiny, voices, work)
    finish("test_cli_clone_synth")


if __name__ == "__main__":
    main()
