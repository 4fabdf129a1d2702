"""The Open3D peer of `gst bench render`: depth images of the same mesh from the same poses through
Open3D's RaycastingScene (Embree), timed, and compared with gst's depth on a subset of frames.

Reads DIR/scene.ply, DIR/poses.json and DIR/gst_depth_*.f32 written by `gst bench render`; writes
DIR/open3d.json.
"""

import argparse
import glob
import json
import os
import time

import numpy as np
import open3d as o3d


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()

    legacy = o3d.io.read_triangle_mesh(os.path.join(args.dir, "scene.ply"))
    mesh = o3d.t.geometry.TriangleMesh.from_legacy(legacy)
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(mesh)
    with open(os.path.join(args.dir, "poses.json")) as f:
        poses = json.load(f)
    width, height = poses["width"], poses["height"]
    # gst (like OpenCV) puts pixel centres at integer coordinates; Open3D's create_rays_pinhole casts through
    # (u + 0.5, v + 0.5). Shifting the principal point by half a pixel makes both cast the same rays.
    k = np.array(poses["intrinsics"])
    k[0, 2] += 0.5
    k[1, 2] += 0.5
    intrinsics = o3d.core.Tensor(k, dtype=o3d.core.Dtype.Float64)
    extrinsics = [o3d.core.Tensor(np.array(e), dtype=o3d.core.Dtype.Float64) for e in poses["camera_from_world"]]

    def depth_of(extrinsic):
        rays = o3d.t.geometry.RaycastingScene.create_rays_pinhole(intrinsics, extrinsic, width, height)
        hits = scene.cast_rays(rays)
        return rays, hits["t_hit"]

    for extrinsic in extrinsics[:10]:
        depth_of(extrinsic)  # warm-up
    started = time.perf_counter()
    for extrinsic in extrinsics:
        depth_of(extrinsic)
    seconds = time.perf_counter() - started

    # Cross-check: z along the optical axis of each hit, against gst's depth.
    diffs = []
    compared = 0
    for path in sorted(glob.glob(os.path.join(args.dir, "gst_depth_*.f32"))):
        k = int(os.path.basename(path)[len("gst_depth_"):-len(".f32")])
        ours = np.fromfile(path, dtype="<f4").reshape(height, width)
        rays, t_hit = depth_of(extrinsics[k])
        rays = rays.numpy().reshape(height, width, 6)
        t = t_hit.numpy().reshape(height, width)
        camera_from_world = np.array(poses["camera_from_world"][k])
        # z in the camera frame of origin + t * direction.
        direction_camera = rays[..., 3:] @ camera_from_world[:3, :3].T
        z = t * direction_camera[..., 2]
        valid = np.isfinite(z) & (ours > 0)
        diffs.append(np.abs(z[valid] - ours[valid]))
        compared += 1
    all_diffs = np.concatenate(diffs) if diffs else np.array([np.nan])
    report = {
        "frames": len(extrinsics),
        "seconds": seconds,
        "fps": len(extrinsics) / seconds,
        "threads": os.cpu_count(),
        "open3d_version": o3d.__version__,
        "compared_frames": compared,
        "median_abs_depth_diff_m": float(np.median(all_diffs)),
        "fraction_within_1mm": float(np.mean(all_diffs <= 0.001)),
    }
    with open(os.path.join(args.dir, "open3d.json"), "w") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
