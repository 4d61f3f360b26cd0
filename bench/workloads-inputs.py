#!/usr/bin/env python3
"""Part of `just bench` (bench/workloads.sh runs it once, outside every
timing): the inputs of the workload benchmarks, the same bytes on every run.

    workloads-inputs.py DIR

DIR/untar/    20,000 files of 1,024 bytes in 20 directories (tarred by the caller)
DIR/tree/     an 8,500-file source tree: 10 components x 10 modules x 85
              files (.c, .h, .rs in turn, 200-3,000 bytes), 110 directories
DIR/npm-pkgs/ 40 npm package tarballs (25 files each), as `npm pack` makes
              them (a `package/` prefix, gzip)
DIR/npm-app/  package.json and a version-3 package-lock.json resolving each
              package to a registry address with its sha512 integrity (so
              `npm ci --offline` takes them from a cache `npm cache add` filled)

    workloads-inputs.py --branch TREE

edits TREE in place into the second branch of the checkout workload: every
fourth file changed, every seventeenth removed, a new component of 400 files.
"""
import base64
import hashlib
import io
import json
import os
import sys
import tarfile


def untar_files(root):
    for d in range(20):
        p = os.path.join(root, f"d{d:02}")
        os.makedirs(p)
        for f in range(1000):
            line = f"{d:02} {f:04} generated for the untar workload\n".encode()
            with open(os.path.join(p, f"f{f:04}.txt"), "wb") as fh:
                fh.write((line * (1024 // len(line) + 1))[:1024])


def source_file(ext, comp, mod, i):
    size = 200 + (i * 389 + mod * 97 + comp * 31) % 2800
    if ext == "rs":
        unit = f"pub fn f{i}_{{n}}(x: u64) -> u64 {{{{ x.wrapping_mul({i + 3}) ^ {{n}} }}}}\n"
    elif ext == "h":
        unit = f"int c{comp}_m{mod}_f{i}_{{n}}(int x);\n"
    else:
        unit = f"int c{comp}_m{mod}_f{i}_{{n}}(int x) {{{{ return x * {i + 3} + {{n}}; }}}}\n"
    out, n = [f"// component {comp}, module {mod}, file {i}\n"], 0
    while sum(map(len, out)) < size:
        out.append(unit.format(n=n))
        n += 1
    return "".join(out)


def source_tree(root):
    exts = ("c", "h", "rs")
    for comp in range(10):
        for mod in range(10):
            p = os.path.join(root, f"comp{comp}", f"mod{mod}")
            os.makedirs(p)
            for i in range(85):
                ext = exts[i % 3]
                with open(os.path.join(p, f"file{i:02}.{ext}"), "w") as fh:
                    fh.write(source_file(ext, comp, mod, i))


def npm_package(name):
    files = {
        "package/package.json": json.dumps(
            {"name": name, "version": "1.0.0", "main": "index.js", "license": "MIT"}, indent=2
        ),
        "package/index.js": "".join(f"module.exports.m{i} = require('./lib/m{i}.js');\n" for i in range(22)),
        "package/README.md": f"# {name}\n\nGenerated for the workload benchmark.\n",
        "package/LICENSE": "MIT\n",
    }
    for i in range(22):
        files[f"package/lib/m{i}.js"] = f"// {name}, module {i}\n" + "".join(
            f"exports.v{j} = function v{j}(x) {{ return x * {j} + {i}; }};\n" for j in range(30)
        )
    buf = io.BytesIO()
    # mtime 0 in the gzip header and 1985-10-26 in the tar: byte-identical runs.
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.USTAR_FORMAT, compresslevel=9) as t:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o644, 499162500
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def npm_inputs(pkgs, app):
    os.makedirs(pkgs)
    os.makedirs(app)
    deps, lock = {}, {}
    for n in range(40):
        name = f"csb-bench-p{n:02}"
        data = npm_package(name)
        with open(os.path.join(pkgs, f"{name}-1.0.0.tgz"), "wb") as fh:
            fh.write(data)
        deps[name] = "1.0.0"
        lock[f"node_modules/{name}"] = {
            "version": "1.0.0",
            "resolved": f"http://registry.invalid/{name}/-/{name}-1.0.0.tgz",
            "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
            "license": "MIT",
        }
    manifest = {"name": "bench-app", "version": "1.0.0", "private": True, "dependencies": deps}
    packages = {"": {"name": "bench-app", "version": "1.0.0", "dependencies": deps}, **lock}
    with open(os.path.join(app, "package.json"), "w") as fh:
        json.dump(manifest, fh, indent=2)
    with open(os.path.join(app, "package-lock.json"), "w") as fh:
        json.dump({"name": "bench-app", "version": "1.0.0", "lockfileVersion": 3, "requires": True, "packages": packages}, fh, indent=2)


def second_branch(root):
    n = 0
    for comp in range(10):
        for mod in range(10):
            for i in range(85):
                path = os.path.join(root, f"comp{comp}", f"mod{mod}", f"file{i:02}.{('c', 'h', 'rs')[i % 3]}")
                n += 1
                if n % 17 == 0:
                    os.unlink(path)
                elif n % 4 == 0:
                    with open(path, "a") as fh:
                        fh.write("// changed on the second branch\n")
    for mod in range(4):
        p = os.path.join(root, "comp10", f"mod{mod}")
        os.makedirs(p)
        for i in range(100):
            with open(os.path.join(p, f"file{i:02}.c"), "w") as fh:
                fh.write(source_file("c", 10, mod, i))


def main():
    if sys.argv[1] == "--branch":
        second_branch(sys.argv[2])
        return
    root = sys.argv[1]
    untar_files(os.path.join(root, "untar"))
    source_tree(os.path.join(root, "tree"))
    npm_inputs(os.path.join(root, "npm-pkgs"), os.path.join(root, "npm-app"))


main()
