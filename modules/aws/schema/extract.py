#!/usr/bin/env python3
"""Extracts the argument index the AWS family's schema check reads (args-6.25.0.json).

Source: the PyPI package cdktf-cdktf-provider-aws 21.22.1, whose wheel ships
`cdktf_cdktf_provider_aws/_jsii/provider-aws@21.22.1.jsii.tgz`; its `package/.jsii` assembly
(JSON) is generated from hashicorp/aws 6.25.0 and has one `<Resource>Config` struct per
resource and data source, listing every argument with its `optional` flag and the structs of
nested blocks.

    pip download cdktf-cdktf-provider-aws==21.22.1 --no-deps -d /tmp/w
    unzip -q /tmp/w/*.whl 'cdktf_cdktf_provider_aws/_jsii/*' -d /tmp/w/x
    tar xzf /tmp/w/x/cdktf_cdktf_provider_aws/_jsii/*.jsii.tgz -C /tmp/w/x
    python3 modules/aws/schema/extract.py /tmp/w/x/package/.jsii > modules/aws/schema/args-6.25.0.json

Only the resource and data source types the family's .tf files use are kept (with every
struct they nest), so the index stays small; a module that starts using another type needs
the index extracted again (the check says so).
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILY = os.path.dirname(HERE)
LINK = re.compile(r"docs/(resources|data-sources)/([a-z0-9_]+) (aws_[a-z0-9_]+)\}")
ANCHOR = re.compile(r"#([a-z0-9_]+) [A-Za-z0-9]+#")
BLOCK = re.compile(r"^([a-z0-9_]+) block\.")


def snake(name):
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def used_types():
    found = {"resource": set(), "data": set()}
    pattern = re.compile(r'^(resource|data)\s+"(aws_[a-z0-9_]+)"', re.M)
    for kind in sorted(os.listdir(FAMILY)):
        d = os.path.join(FAMILY, kind)
        if not os.path.isdir(d):
            continue
        for f in os.listdir(d):
            if f.endswith(".tf"):
                for what, ty in pattern.findall(open(os.path.join(d, f)).read()):
                    found[what].add(ty)
    return found


def struct_of(ty):
    """(struct fqn, is a list) of a property type that is a nested block, else None."""
    if "fqn" in ty:
        return ty["fqn"], False
    if "collection" in ty:
        inner = ty["collection"]["elementtype"]
        if "fqn" in inner and ty["collection"]["kind"] == "array":
            return inner["fqn"], True
        return None
    if "union" in ty:
        for t in ty["union"]["types"]:
            s = struct_of(t)
            if s and s[0] != "cdktf.IResolvable":
                return s
    return None


def main(path):
    assembly = json.load(open(path))
    types = assembly["types"]
    wanted = used_types()
    out = {
        "source": "PyPI cdktf-cdktf-provider-aws 21.22.1, _jsii/provider-aws@21.22.1.jsii.tgz",
        "provider": "hashicorp/aws 6.25.0",
        "resource": {},
        "data": {},
        "blocks": {},
    }
    pending = []

    def args_of(fqn):
        props = {}
        for p in types[fqn].get("properties", []):
            summary = p.get("docs", {}).get("summary", "")
            m = ANCHOR.search(summary) or BLOCK.match(summary)
            name = m.group(1) if m else snake(p["name"])
            arg = {"required": not p.get("optional", False)}
            s = struct_of(p["type"])
            if s and s[0] in types and types[s[0]].get("datatype"):
                arg["block"] = s[0].split(".", 1)[1]
                arg["list"] = s[1]
                pending.append(s[0])
            props[name] = arg
        return props

    for fqn, t in types.items():
        if t.get("kind") != "class":
            continue
        m = LINK.search(t.get("docs", {}).get("summary", ""))
        if not m:
            continue
        what = "resource" if m.group(1) == "resources" else "data"
        name = m.group(3)
        if name not in wanted[what]:
            continue
        config = t["initializer"]["parameters"][2]["type"]["fqn"]
        out[what][name] = args_of(config)
    while pending:
        fqn = pending.pop()
        key = fqn.split(".", 1)[1]
        if key not in out["blocks"]:
            out["blocks"][key] = {}
            out["blocks"][key] = args_of(fqn)
    missing = {w: sorted(wanted[w] - set(out[w])) for w in wanted}
    if any(missing.values()):
        sys.exit(f"not in the assembly: {missing}")
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
