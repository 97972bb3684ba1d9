"""The site's search: a Pagefind index of the built site (pagefind/ beside the pages), written after mkdocs.

Pagefind splits its index into chunks a browser fetches as the query needs them, where mkdocs' built-in search
had every browser download one index of the whole site first (13 MB on the full history). It indexes the pages
the nav hook marked (mkdocs_hooks.on_post_page: not the errors the newest release no longer raises), without
the sections the templates keep out of search."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .model import UserError

OUTPUT = "pagefind"
UNUSED = ("pagefind-ui.*", "pagefind-component-ui.*", "pagefind-modular-ui.*", "pagefind-highlight.js")  # its UIs: the
# header's box (site/assets/search.js) uses Pagefind's JS API alone


def index_site(site_dir: Path) -> int:
    """Index the built site in site_dir into site_dir/pagefind; returns how many pages were indexed."""
    try:
        from pagefind.index import IndexConfig, PagefindIndex
    except ImportError:
        raise UserError("the site's search needs the pagefind package: reinstall vllm-errors") from None

    async def run() -> int:
        config = IndexConfig(output_path=str(site_dir / OUTPUT), force_language="en", exclude_selectors=[".headerlink"],
                             keep_index_url=True)  # the site links index.html pages by name (use_directory_urls: false)
        async with PagefindIndex(config=config) as index:
            done = await index.add_directory(str(site_dir))
        return done["page_count"]

    try:
        # In a thread of its own: a caller may already run an event loop (a notebook, a browser driver).
        with ThreadPoolExecutor(max_workers=1) as thread:
            pages = thread.submit(asyncio.run, run()).result()
    except FileNotFoundError as e:
        raise UserError(f"the site's search could not be indexed: {e}; reinstall the pagefind package") from None
    for pattern in UNUSED:
        for path in (site_dir / OUTPUT).glob(pattern):
            path.unlink()
    return pages
