"""VideoBaseDataset's constructor and item access as in ms-vlmeval 0.0.20 (dataset/video_base.py); frame
extraction needs decord there and is not part of the shim."""

import os
import os.path as osp
from abc import ABCMeta, abstractmethod

import numpy as np

from vlmeval.smp import LMUDataRoot, load


class VideoBaseDataset(metaclass=ABCMeta):
    MODALITY = "VIDEO"

    def __init__(self, dataset="MMBench-Video", pack=False, nframe=0, fps=-1):
        self.dataset_name = dataset
        ret = self.prepare_dataset(dataset)
        assert ret is not None
        self.frame_root = osp.join(LMUDataRoot(), "images", dataset)
        os.makedirs(self.frame_root, exist_ok=True)
        self.data_root = ret["root"]
        self.data_file = ret["data_file"]
        self.data = load(self.data_file)
        if "index" not in self.data:
            self.data["index"] = np.arange(len(self.data))
        assert "question" in self.data and "video" in self.data
        self.videos = sorted(set(self.data["video"]))
        self.pack = pack
        self.nframe = nframe
        self.fps = fps
        if self.fps > 0 and self.nframe > 0:
            raise ValueError("fps and nframe should not be set at the same time")

    def __len__(self):
        return len(self.videos) if self.pack else len(self.data)

    def save_video_frames(self, video):
        raise NotImplementedError("shim: frame extraction needs decord (use a video LLM, --video-llm)")

    @abstractmethod
    def evaluate(self, eval_file, **judge_kwargs):
        pass

    @abstractmethod
    def build_prompt(self, idx):
        pass

    @abstractmethod
    def prepare_dataset(self, dataset):
        pass
