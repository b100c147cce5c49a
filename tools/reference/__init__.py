"""PyTorch references of the kztts model stages, written from the official code.

Modules (each also a command-line script; see README.md beside this file):
    safetensors_io  plain reader/writer of .safetensors files (checkpoints, goldens)
    codec_decoder   codes [T, 16] -> 24 kHz waveform, with every intermediate stage

Data flows from a checkpoint directory (tools/make_checkpoint.py or real
weights) through a reference into a golden .safetensors file that the C tests
in tests/model/ compare against.
"""
