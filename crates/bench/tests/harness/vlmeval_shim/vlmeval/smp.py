"""vlmeval.smp's load/dump/LMUDataRoot as ms-vlmeval 0.0.20 defines them (smp/file.py), for TSV, xlsx and
JSON."""

import csv
import json
import os

import pandas as pd


def LMUDataRoot():  # noqa: N802  (VLMEvalKit's name)
    if "LMUData" in os.environ and os.path.exists(os.environ["LMUData"]):
        return os.environ["LMUData"]
    root = os.path.join(os.path.expanduser("~"), "LMUData")
    os.makedirs(root, exist_ok=True)
    return root


def load(f):
    suffix = f.split(".")[-1]
    if suffix == "tsv":
        return pd.read_csv(f, sep="\t")
    if suffix == "xlsx":
        return pd.read_excel(f)
    if suffix == "json":
        with open(f, encoding="utf-8") as handle:
            return json.load(handle)
    raise NotImplementedError("shim: load of .%s" % suffix)


def dump(data, f):
    suffix = f.split(".")[-1]
    if suffix == "tsv":
        data.to_csv(f, sep="\t", index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)
    elif suffix == "xlsx":
        data.to_excel(f, index=False, engine="xlsxwriter")
    elif suffix == "json":
        with open(f, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=4, ensure_ascii=False)
    else:
        raise NotImplementedError("shim: dump to .%s" % suffix)
