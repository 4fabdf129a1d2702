"""Runs an exported lmms-eval task folder the way lmms-eval's task loader does, without lmms-eval or torch.

What it stands in for (lmms_eval/utils.py and api/task.py of lmms-eval 0.7.3): YAML with `!function
module.name` tags and `include:` of a template, `dataset_path: json` with `dataset_kwargs.data_files.test`,
then per document doc_to_visual / doc_to_text / doc_to_messages, process_results(doc, [prediction]) and each
metric's aggregation over the subtask's results; a group's aggregate_metric_list (mean, not weighted by
size) over its subtasks' scores.

Usage: lmms_task_check.py EXPORT [PREDICTIONS.jsonl] [EXTRACT_CASES.json]
Prints JSON: {"tasks": {name: score}, "groups": {name: score}, "documents": n, "extract_mismatches": [...]}.
"""

import importlib.util
import json
import os
import sys

import yaml


class _Function:
    def __init__(self, dotted):
        self.dotted = dotted


def _loader():
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: _Function(loader.construct_scalar(node)))
    return Loader


def load_yaml(folder, name):
    with open(os.path.join(folder, name), encoding="utf-8") as f:
        config = yaml.load(f, Loader=_loader())
    if "include" in config:
        base = load_yaml(folder, config.pop("include"))
        base.update(config)
        config = base
    return config


def resolve(folder, value, modules):
    if not isinstance(value, _Function):
        return value
    module_name, function = value.dotted.rsplit(".", 1)
    if module_name not in modules:
        spec = importlib.util.spec_from_file_location(module_name, os.path.join(folder, module_name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[module_name] = module
    return getattr(modules[module_name], function)


def main():
    folder = sys.argv[1]
    predictions = {}
    if len(sys.argv) > 2 and sys.argv[2]:
        with open(sys.argv[2], encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    entry = json.loads(line)
                    predictions[entry["uid"]] = entry["prediction"]
    modules = {}
    tasks, groups, documents = {}, {}, 0
    names = sorted(n for n in os.listdir(folder) if n.endswith(".yaml"))
    configs = {n: load_yaml(folder, n) for n in names}
    for name, config in configs.items():
        if "task" not in config or "group" in config:
            continue
        assert config["dataset_path"] == "json", name
        data_file = config["dataset_kwargs"]["data_files"][config["test_split"]]
        assert os.path.isabs(data_file), "lmms-eval reads data_files relative to its working directory"
        to_visual = resolve(folder, config["doc_to_visual"], modules)
        to_text = resolve(folder, config["doc_to_text"], modules)
        to_messages = resolve(folder, config["doc_to_messages"], modules)
        to_target = resolve(folder, config["doc_to_target"], modules)
        process = resolve(folder, config["process_results"], modules)
        kwargs = config["lmms_eval_specific_kwargs"]["default"]
        results = {}
        with open(data_file, encoding="utf-8") as f:
            docs = [json.loads(line) for line in f if line.strip()]
        for doc in docs:
            documents += 1
            visuals = to_visual(doc)
            for path in visuals:
                assert os.path.isfile(path), "%s: visual %s missing" % (doc["uid"], path)
            text = to_text(doc, kwargs)
            assert isinstance(text, str) and text, doc["uid"]
            messages = to_messages(doc, kwargs)
            media = [c["url"] for c in messages[0]["content"] if c["type"] != "text"]
            assert sorted(media) == sorted(visuals), doc["uid"]
            assert isinstance(to_target(doc), str)
            for metric, value in process(doc, [predictions.get(doc["uid"], "")]).items():
                results.setdefault(metric, []).append(value)
        for entry in config["metric_list"]:
            aggregate = resolve(folder, entry["aggregation"], modules)
            tasks[config["task"]] = aggregate(results.get(entry["metric"], []))
    for name, config in configs.items():
        if "group" in config:
            scores = [tasks[t] for t in config["task"]]
            assert config["aggregate_metric_list"][0]["weight_by_size"] is False
            groups[config["group"]] = sum(scores) / len(scores)
    mismatches = []
    if len(sys.argv) > 3:
        sys.path.insert(0, folder)
        import gst_score

        with open(sys.argv[3], encoding="utf-8") as f:
            for case in json.load(f):
                got = gst_score.extract(case["kind"], case["text"])
                if isinstance(got, tuple):
                    got = list(got)
                expected = case["expected"]
                same = got == expected or (
                    isinstance(got, float) and isinstance(expected, float) and abs(got - expected) < 1e-9
                )
                if not same:
                    mismatches.append({"case": case, "python": got})
    print(json.dumps({"tasks": tasks, "groups": groups, "documents": documents, "extract_mismatches": mismatches}))


if __name__ == "__main__":
    main()
