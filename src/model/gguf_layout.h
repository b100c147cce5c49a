/*
 * gguf_layout.h - what a kztts model GGUF file holds (written by `kztts quantize`,
 * src/model/quantize.c; read by src/model/model_gguf.c).
 *
 * Metadata:
 *   general.architecture            "qwen3-tts"
 *   general.name                    the source directory's name
 *   general.alignment               64 (tensor data is 64-byte aligned, so packed
 *                                   codec panels are used in place)
 *   kztts.format_version            uint32, KZ_GGUF_FORMAT_VERSION
 *   kztts.recipe                    the --type it was made with ("q8_0", "q4_0", ...)
 *   kztts.config.json               config.json, verbatim     (absent: codec-only model)
 *   kztts.generation_config.json    generation_config.json    (optional)
 *   kztts.codec.config.json         speech_tokenizer/config.json (or a codec-only
 *                                   directory's config.json)
 *   kztts.tokenizer.vocab.json      vocab.json                (optional, all three
 *   kztts.tokenizer.merges.txt      merges.txt                 or none)
 *   kztts.tokenizer.config.json     tokenizer_config.json
 *   kztts.tokenizer.bpe_tables      uint32 KZ_BPE_TABLES_VERSION (text/bpe.h) when the
 *                                   tokenizer.bpe.* tensors below are present
 *   kztts.codec.forms               optional: the codec precision ("bf16", "winograd" or
 *                                   "winograd-bf16") whose converted weights the file
 *                                   stores (`kztts quantize --codec-forms`)
 * Tensors:
 *   model.<name>    every tensor of model.safetensors under its own name, in the
 *                   recipe's type (BF16/F32/F16 as stored, or Q8_0 / Q4_0); only
 *                   talker.* matrices are ever quantized: a Base model's
 *                   speaker_encoder.* stays as stored (F32 with --type f32), so the
 *                   file gives the directory's x-vectors
 *   codec.<name>    every tensor of speech_tokenizer/model.safetensors that the
 *                   engine does not pack, as stored (F32/BF16/F16)
 *   codec.<name>.packed   the codec's convolution weights as kz_packed panels (the
 *                   decoder's, and the encoder's stride-1 convs and transformer linears;
 *                   its strided convs and codebooks, packed otherwise, stay as stored: F32),
 *                   F32 [n_panels, taps * k_in, 16] (layers/conv.c), used in place
 *   codec.<name>.packed_bf16, codec.<name>.winograd   with kztts.codec.forms: the forms
 *                   that precision converts those convs to at load, used in place
 *                   instead (layers/conv_convert.h: BF16 [n_panels, taps * k_pairs, 16,
 *                   2]; F32 [m + r - 1, n_panels, k_in, 16])
 *   tokenizer.bpe.*  with a tokenizer: the BPE model's tables as the tokenizer files
 *                   build them (text/bpe.h kz_bpe_tables), used in place so that a load
 *                   builds nothing from vocab.json and merges.txt: blob I8 [n_blob],
 *                   token_offsets and token_lengths I32 [n_ids], vocab_slots I32
 *                   [n_vocab_slots, 2], merge_slots I64 [n_merge_slots], merge_results
 *                   I32 [n_merges], byte_ids I32 [256]. A reader that finds them
 *                   malformed, or under another tables version, builds from the texts.
 * Data order: the model.* tensors in the order a frame reads them (quantize.c
 * key_of): embeddings and the text projection, the talker's layers 0.. (norm, q, k,
 * v, q/k norms, o, norm, gate, up, down), its norm and codec head, then the code
 * predictor's layers, norm and heads 0..14 as one contiguous range; then codec.*, then tokenizer.*.
 * Readers find tensors by name, so the order is a speed matter only.
 * The configs are stored as the original JSON text so one parser serves both
 * model kinds and nothing is lost; the tensors keep the checkpoint's names, so
 * one loading path (layers/, model/) serves both.
 */
#ifndef KZ_GGUF_LAYOUT_H
#define KZ_GGUF_LAYOUT_H

#define KZ_GGUF_ARCHITECTURE "qwen3-tts"
#define KZ_GGUF_FORMAT_VERSION 1u
#define KZ_GGUF_ALIGNMENT 64u

#define KZ_GGUF_KEY_FORMAT "kztts.format_version"
#define KZ_GGUF_KEY_RECIPE "kztts.recipe"
#define KZ_GGUF_KEY_CONFIG "kztts.config.json"
#define KZ_GGUF_KEY_GENERATION "kztts.generation_config.json"
#define KZ_GGUF_KEY_CODEC_CONFIG "kztts.codec.config.json"
#define KZ_GGUF_KEY_VOCAB "kztts.tokenizer.vocab.json"
#define KZ_GGUF_KEY_MERGES "kztts.tokenizer.merges.txt"
#define KZ_GGUF_KEY_TOKENIZER_CONFIG "kztts.tokenizer.config.json"
#define KZ_GGUF_KEY_CODEC_FORMS "kztts.codec.forms"
/* u32 1: kz_quantize checked every value and block scale it wrote to be finite, so a load
 * skips its own scan of the file (model.c check_finite); synthesis still refuses
 * non-finite logits and audio, which is what a file altered afterwards would produce. */
#define KZ_GGUF_KEY_WEIGHTS_CHECKED "kztts.weights_checked"

#define KZ_GGUF_KEY_BPE_TABLES "kztts.tokenizer.bpe_tables"
#define KZ_GGUF_BPE_BLOB "tokenizer.bpe.blob"
#define KZ_GGUF_BPE_TOKEN_OFFSETS "tokenizer.bpe.token_offsets"
#define KZ_GGUF_BPE_TOKEN_LENGTHS "tokenizer.bpe.token_lengths"
#define KZ_GGUF_BPE_VOCAB_SLOTS "tokenizer.bpe.vocab_slots"
#define KZ_GGUF_BPE_MERGE_SLOTS "tokenizer.bpe.merge_slots"
#define KZ_GGUF_BPE_MERGE_RESULTS "tokenizer.bpe.merge_results"
#define KZ_GGUF_BPE_BYTE_IDS "tokenizer.bpe.byte_ids"

#define KZ_GGUF_PREFIX_MODEL "model."
#define KZ_GGUF_PREFIX_CODEC "codec."
#define KZ_GGUF_PACKED_SUFFIX ".packed"

#endif
