"""Publishing a dataset folder to the Hugging Face hub (``knowwhen export --push REPO_ID``).

``push_dataset`` creates the dataset repository (private unless told otherwise) and uploads the folder
in one commit with ``huggingface_hub`` (the optional ``hub`` extra, imported only for a real upload).
The token is huggingface_hub's own (``HF_TOKEN`` or a saved login); it is never read or written here.
With ``dry_run`` nothing is sent: the plan lists what would be uploaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..exceptions import KnowwhenError

__all__ = ["UploadPlan", "push_dataset", "upload_plan"]


@dataclass(frozen=True)
class UploadPlan:
    """What an upload sends: the repository, its visibility, and each file (relative path, bytes)."""

    repo_id: str
    private: bool
    files: tuple[tuple[str, int], ...]

    @property
    def total_bytes(self) -> int:
        return sum(size for _name, size in self.files)


def upload_plan(folder: Path, repo_id: str, *, private: bool = True) -> UploadPlan:
    """Every file under ``folder`` that an upload would send, sorted by path."""
    folder = Path(folder)
    if not (folder / "README.md").is_file():
        raise KnowwhenError(f"{folder}: no README.md; push a folder written by knowwhen export")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise KnowwhenError(f"--push: expected a repository id OWNER/NAME, got {repo_id!r}")
    files = sorted(
        (p.relative_to(folder).as_posix(), p.stat().st_size) for p in folder.rglob("*") if p.is_file()
    )
    return UploadPlan(repo_id, private, tuple(files))


def push_dataset(folder: Path, repo_id: str, *, private: bool = True, dry_run: bool = False) -> UploadPlan:
    """Upload ``folder`` as the dataset repository ``repo_id`` (created if missing); returns the plan."""
    plan = upload_plan(folder, repo_id, private=private)
    if dry_run:
        return plan
    try:
        # optional: huggingface_hub is the [hub] extra
        from huggingface_hub import HfApi
    except ImportError:
        raise KnowwhenError("pushing needs huggingface_hub: pip install 'knowwhen-runner[hub]'") from None
    api = HfApi()
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        api.upload_folder(
            folder_path=str(folder),
            repo_id=repo_id,
            repo_type="dataset",
            commit_message=f"knowwhen export ({len(plan.files)} files)",
        )
    except Exception as exc:  # offline, refused token, HTTP: the hub raises many kinds; say it in one line
        raise KnowwhenError(f"could not push to {repo_id} ({type(exc).__name__}: {exc})") from None
    return plan
