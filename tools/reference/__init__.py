"""PyTorch references of the kztts model stages, written from the official code.

Each module here mirrors one upstream component and is also a command-line
script; README.md beside this file lists them with their commands and the
names of the tensors they write. Data flows from a checkpoint directory
(tools/make_checkpoint.py or real weights) through a reference into a golden
.safetensors file (written with safetensors_io) that the C tests in
tests/model/ compare against.
"""
