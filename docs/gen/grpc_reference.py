"""The gRPC reference of a .proto file, as Markdown: its services with their RPCs, then its messages
and enums with every field, each with the comment written above it in the file.

protoc itself reads the file (grpcio-tools' bundled compiler, with `--include_source_info`), so the
page says what the generated code does: field numbers, types, `repeated`, maps and oneofs included.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from google.protobuf import descriptor_pb2

# Field numbers of descriptor.proto, the steps of a SourceCodeInfo location's path.
FILE_MESSAGE, FILE_ENUM, FILE_SERVICE = 4, 5, 6
MESSAGE_FIELD, MESSAGE_NESTED, MESSAGE_ENUM = 2, 3, 4
ENUM_VALUE, SERVICE_METHOD = 2, 2

_SCALARS = {
    getattr(descriptor_pb2.FieldDescriptorProto, name): name[len("TYPE_"):].lower()
    for name in descriptor_pb2.FieldDescriptorProto.Type.keys()
}


def read_proto(path: Path, include: Path) -> descriptor_pb2.FileDescriptorProto:
    """`path` as protoc parses it, comments kept; `include` is the folder imports are relative to."""
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        # The import paths that the .proto files use (`despina/proto/ir.proto`) map onto `include`.
        args = ["protoc", f"-Idespina/proto={include}", f"-I{protoc._get_resource_file_name('grpc_tools', '_proto')}",
                "--include_source_info", f"--descriptor_set_out={out}", f"despina/proto/{path.name}"]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc could not read {path}: run `{' '.join(args)}` to see why")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return files[-1]


def _comments(proto: descriptor_pb2.FileDescriptorProto) -> dict[tuple[int, ...], str]:
    return {tuple(loc.path): " ".join(loc.leading_comments.split()) for loc in proto.source_code_info.location
            if loc.leading_comments.strip()}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _link(type_name: str, package: str) -> str:
    """A message or enum type as a link to its section, when it is one of this file's."""
    if not type_name.startswith(f".{package}."):
        return type_name.lstrip(".")
    name = type_name[len(package) + 2:]
    return f"[{name}](#{name.replace('.', '').lower()})"


def _type(field: descriptor_pb2.FieldDescriptorProto, package: str,
          maps: dict[str, descriptor_pb2.DescriptorProto]) -> str:
    if field.type_name:
        entry = maps.get(field.type_name)
        if entry is not None:
            key, value = entry.field
            return f"map&lt;{_type(key, package, maps)}, {_type(value, package, maps)}&gt;"
        text = _link(field.type_name, package)
    else:
        text = _SCALARS[field.type]
    repeated = field.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    return f"repeated {text}" if repeated else text


def _message(message: descriptor_pb2.DescriptorProto, path: tuple[int, ...], prefix: str, package: str,
             comments: dict[tuple[int, ...], str], maps: dict[str, descriptor_pb2.DescriptorProto]) -> list[str]:
    name = prefix + message.name
    lines = [f"### {name}", ""]
    if comments.get(path):
        lines += [comments[path], ""]
    if message.field:
        lines += ["| field | number | type | |", "|---|---|---|---|"]
        for i, field in enumerate(message.field):
            oneof = ""
            if field.HasField("oneof_index") and not field.proto3_optional:
                oneof = f"one of `{message.oneof_decl[field.oneof_index].name}`. "
            note = oneof + comments.get((*path, MESSAGE_FIELD, i), "")
            lines.append(f"| `{field.name}` | {field.number} | {_type(field, package, maps)} | {_cell(note)} |")
    else:
        lines.append("No fields.")
    lines.append("")
    for i, nested in enumerate(message.nested_type):
        if not nested.options.map_entry:
            lines += _message(nested, (*path, MESSAGE_NESTED, i), f"{name}.", package, comments, maps)
    for i, enum in enumerate(message.enum_type):
        lines += _enum(enum, (*path, MESSAGE_ENUM, i), f"{name}.", comments)
    return lines


def _enum(enum: descriptor_pb2.EnumDescriptorProto, path: tuple[int, ...], prefix: str,
          comments: dict[tuple[int, ...], str]) -> list[str]:
    lines = [f"### {prefix}{enum.name}", ""]
    if comments.get(path):
        lines += [comments[path], ""]
    lines += ["| value | number | |", "|---|---|---|"]
    for i, value in enumerate(enum.value):
        lines.append(f"| `{value.name}` | {value.number} | {_cell(comments.get((*path, ENUM_VALUE, i), ''))} |")
    return [*lines, ""]


def _map_entries(message: descriptor_pb2.DescriptorProto, scope: str,
                 out: dict[str, descriptor_pb2.DescriptorProto]) -> None:
    for nested in message.nested_type:
        full = f"{scope}.{message.name}.{nested.name}"
        if nested.options.map_entry:
            out[full] = nested
        _map_entries(nested, f"{scope}.{message.name}", out)


def render(proto: descriptor_pb2.FileDescriptorProto) -> str:
    """Markdown for one parsed .proto file (from `read_proto`)."""
    comments = _comments(proto)
    maps: dict[str, descriptor_pb2.DescriptorProto] = {}
    for message in proto.message_type:
        _map_entries(message, f".{proto.package}", maps)
    lines = [f"Package `{proto.package}`.", ""]
    for s, service in enumerate(proto.service):
        lines += [f"### service {service.name}", ""]
        if comments.get((FILE_SERVICE, s)):
            lines += [comments[(FILE_SERVICE, s)], ""]
        lines += ["| RPC | request | response | |", "|---|---|---|---|"]
        for m, method in enumerate(service.method):
            request, response = (_link(t, proto.package) for t in (method.input_type, method.output_type))
            note = _cell(comments.get((FILE_SERVICE, s, SERVICE_METHOD, m), ""))
            lines.append(f"| `{method.name}` | {request} | {response} | {note} |")
        lines.append("")
    for i, message in enumerate(proto.message_type):
        lines += _message(message, (FILE_MESSAGE, i), "", proto.package, comments, maps)
    for i, enum in enumerate(proto.enum_type):
        lines += _enum(enum, (FILE_ENUM, i), "", comments)
    return "\n".join(lines)
