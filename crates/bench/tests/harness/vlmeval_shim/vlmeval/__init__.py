"""A shim of the few parts of VLMEvalKit (ms-vlmeval 0.0.20, `pip download --no-deps ms-vlmeval==0.0.20`)
that an exported GST dataset touches, without torch: `vlmeval.smp` (load, dump, LMUDataRoot),
`vlmeval.dataset` (the class lists and build_dataset), `vlmeval.dataset.video_base.VideoBaseDataset`
(its constructor) and `vlmeval.run` (a run of --data datasets with a stub model: inference as
inference_video.py does it, the prediction table dumped as VLMEvalKit dumps a TSV, then evaluate).
"""
