"""vlmeval.dataset's registry as ms-vlmeval 0.0.20 has it: class lists and build_dataset (no built-in
datasets here)."""

import inspect

VIDEO_DATASET = []
DATASET_CLASSES = []
SUPPORTED_DATASETS = []


def build_dataset(dataset_name, **kwargs):
    for cls in DATASET_CLASSES:
        if dataset_name in cls.supported_datasets():
            init_params = inspect.signature(cls.__init__).parameters
            filtered_kwargs = {k: v for k, v in kwargs.items() if k in init_params}
            return cls(dataset=dataset_name, **filtered_kwargs)
    return None
