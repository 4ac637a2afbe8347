"""`despina.signature`: Triton's signature grammar, entry by entry, host tensor descriptors
(`tensordesc<fp16[128,64]>`) among them, and a clear SignatureError for every malformed entry."""

from __future__ import annotations

import pytest

from despina.compiler.ir.types import PointerType, ScalarType, float32, int32
from despina.signature import DescriptorEntry, SignatureEntry, SignatureError, bind, parse_entry, split

fp16 = ScalarType("fp16")


@pytest.mark.parametrize(
    ("text", "ty", "hint"),
    [
        ("*fp32:16", PointerType(float32), 16),
        (" i32 ", int32, 0),
        ("i32:1", int32, 1),
        ("u64", ScalarType("uint64"), 0),
        ("*bf16", PointerType(ScalarType("bf16")), 0),
        ("i1", ScalarType("int1"), 0),
        ("int32:16", int32, 16),
        ("**fp16", PointerType(PointerType(fp16)), 0),
        ("*fp8e4nv:16", PointerType(ScalarType("fp8e4nv")), 16),
        ("*fp8e5", PointerType(ScalarType("fp8e5")), 0),
        ("fp32:+", float32, "+"),
        ("f16 : + ", fp16, "+"),
        ("i32:16+", int32, "16+"),
        ("u64 : 16+", ScalarType("uint64"), "16+"),
    ],
)
def test_entries_parse(text, ty, hint):
    entry = parse_entry(text)
    assert (entry.type, entry.hint) == (ty, hint)


def test_entries_print_in_triton_names():
    assert [str(parse_entry(t)) for t in ("*f32:16", "int64", "uint8:16", "bf16", "f32:+")] == [
        "*fp32:16", "i64", "u8:16", "bf16", "fp32:+"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("*f33", "unknown type '\\*f33'"),
        ("i32:8", "use :16"),
        ("i32:x", "not a number"),
        ("fp32:16", "pointers and integers only"),
        ("*fp32:1", "integers only"),
        ("i1:16", "pointers and integers only"),
        ("i32:+", "floats only"),
        ("*fp32:+", "floats only"),
        ("fp32:-", "use :16, :1, :\\+ or :16\\+"),
        ("fp32:16+", "integers only"),
        ("*fp16:16+", "integers only"),
        ("", "empty signature entry"),
        ("fp8e4nv", "fp8 arguments are arrays \\('\\*fp8e4nv'\\)"),
    ],
)
def test_bad_entries_are_clear_errors(text, message):
    with pytest.raises(SignatureError, match=message):
        parse_entry(text)


# ---- tensor descriptors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "entry", "printed"),
    [
        ("tensordesc<fp16[128,64]>", DescriptorEntry(fp16, (128, 64)), "tensordesc<fp16[128,64]>"),
        ("tensordesc<fp16[128, 64]>", DescriptorEntry(fp16, (128, 64)), "tensordesc<fp16[128,64]>"),  # Triton's repr
        (" tensordesc < f16 [ 64 , 64 ] > : 16 ", DescriptorEntry(fp16, (64, 64), hint=16), "tensordesc<fp16[64,64]>:16"),
        ("tensordesc<fp32[64,64],padding=nan>", DescriptorEntry(float32, (64, 64), "nan"),
         "tensordesc<fp32[64,64],padding=nan>"),
        ("tensordesc<bf16[16],padding=zero>:16", DescriptorEntry(ScalarType("bf16"), (16,), hint=16),
         "tensordesc<bf16[16]>:16"),
        ("tensordesc<fp8e4nv[128,128]>", DescriptorEntry(ScalarType("fp8e4nv"), (128, 128)),
         "tensordesc<fp8e4nv[128,128]>"),
        ("tensordesc<int8[2,4,16]>", DescriptorEntry(ScalarType("int8"), (2, 4, 16)), "tensordesc<i8[2,4,16]>"),
    ],
)
def test_descriptor_entries_parse_and_print(text, entry, printed):
    assert parse_entry(text) == entry
    assert str(entry) == printed and parse_entry(printed) == entry


def test_a_descriptor_stands_for_the_parameters_a_launch_flattens_it_into():
    """A host TensorDescriptor `d` arrives as d.base (16-byte aligned: TensorDescriptor takes no other), its
    sizes and its strides but the last, typed as `JITFunction.specialize` types them."""
    entry = parse_entry("tensordesc<fp16[128,64]>:16")
    assert isinstance(entry, DescriptorEntry)
    assert (entry.arg.block_shape, entry.arg.padding) == ((128, 64), "zero")
    assert entry.parts("d") == [("d.base", SignatureEntry(PointerType(fp16), 16)), ("d.shape0", SignatureEntry(int32, 16)),
                                ("d.shape1", SignatureEntry(int32, 16)), ("d.stride0", SignatureEntry(int32, 16))]
    plain = parse_entry("tensordesc<fp16[64]>")
    assert isinstance(plain, DescriptorEntry)
    assert plain.parts("x") == [("x.base", SignatureEntry(PointerType(fp16), 16)), ("x.shape0", SignatureEntry(int32))]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tensordesc<f33[128,64]>", r"unknown element type 'f33' in 'tensordesc<f33\[128,64\]>': use i1, i8"),
        ("tensordesc<[128,64]>", r"unknown element type '' in"),
        ("tensordesc<fp16[]>", r"'tensordesc<fp16\[\]>' has no block shape"),
        ("tensordesc<fp16[0,64]>", r"'tensordesc<fp16\[0,64\]>': the block's sizes \[0, 64\] must be positive"),
        ("tensordesc<fp16[-64,64]>", r"sizes \[-64, 64\] must be positive"),
        ("tensordesc<fp16[128,x]>", r"block size 'x' in 'tensordesc<fp16\[128,x\]>' is not a number"),
        ("tensordesc<fp16[128,,64]>", r"block size '' in .* is not a number"),
        ("tensordesc<fp16(128,64)>", r"'tensordesc<fp16\(128,64\)>' is not a tensor descriptor entry: write "
                                     r"tensordesc<DTYPE\[B0,B1,...\]>"),
        ("tensordesc<fp16[128,64]", "is not a tensor descriptor entry"),
        ("tensordesc<fp16[128,64]]>", "is not a tensor descriptor entry"),
        ("tensordesc fp16[128,64]", "is not a tensor descriptor entry"),
        ("*tensordesc<fp16[128,64]>", "not behind a pointer; drop the '\\*'"),
        # the rules a launch's TensorDescriptor and the kernel's descriptor enforce
        ("tensordesc<fp16[128,48]>", r"signature entry 'tensordesc<fp16\[128,48\]>': block_shape \[128, 48\] must hold "
                                     "powers of two"),
        ("tensordesc<fp16[128,4]>", r"block_shape \[128, 4\] has 8 bytes along its last dimension \(4 x fp16\); it needs "
                                    "at least 16"),
        ("tensordesc<fp16[2,2,2,16]>", "has rank 4; despina's tensor descriptors have rank 1 to 3"),
        ("tensordesc<fp32[1024,2048]>", "has 2097152 elements, more than 1048576"),
        ("tensordesc<i1[16]>", "tensor descriptors take tensors of numbers of 8 bits or more, not of int1"),
        ("tensordesc<i32[16,16],padding=nan>", "padding_option='nan' needs a floating-point block, got int32"),
        ("tensordesc<fp16[16,16],padding=inf>", "padding_option must be 'zero' or 'nan', got 'inf'"),
        ("tensordesc<fp16[128,64]>:1", r"hint :1 in 'tensordesc<fp16\[128,64\]>:1': a tensor descriptor takes :16"),
        ("tensordesc<fp16[128,64]>:8", "use :16"),
    ],
)
def test_bad_descriptor_entries_are_clear_errors(text, message):
    with pytest.raises(SignatureError, match=message):
        parse_entry(text)


def test_a_signature_string_splits_outside_brackets():
    assert split("*fp16:16, tensordesc<fp16[128, 64]>:16,i32") == ["*fp16:16", " tensordesc<fp16[128, 64]>:16", "i32"]
    assert split("tensordesc<fp32[64,64],padding=nan>") == ["tensordesc<fp32[64,64],padding=nan>"]
    assert split("") == [""]
    for text, entry in [("tensordesc<fp16[128,64],i32", "tensordesc<fp16[128,64],i32"),
                        ("*fp16,tensordesc<fp16[16]>>,i32", "tensordesc<fp16[16]>>")]:
        with pytest.raises(SignatureError, match=rf"signature entry '{entry.replace('[', '.')}' has unbalanced brackets"):
            split(text)


def test_bind_takes_descriptors_in_every_form_of_signature():
    names = ["a_desc", "n"]
    want = {"a_desc": DescriptorEntry(fp16, (128, 64), hint=16), "n": SignatureEntry(int32)}
    assert bind("tensordesc<fp16[128, 64]>:16,i32", names, "k") == want
    assert bind(["tensordesc<fp16[128,64]>:16", "i32"], names, "k") == want
    assert bind({"n": "i32", "a_desc": "tensordesc<fp16[128,64]>:16"}, names, "k") == want
    with pytest.raises(SignatureError, match=r"kernel 'k' has 2 run-time parameters \(a_desc, n\) but the signature has 3"):
        bind("tensordesc<fp16[128,64]>,i32,i32", names, "k")
