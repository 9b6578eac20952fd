"""Issue 45, item 7: files by reference. Over MCP a run's collected files
come back as `resource_link` blocks (with size, type and, for text, a
preview in the text block) that a host reads with `resources/read` or the
`read_file` tool; `collect_mode: "inline"` embeds them; every figure's and
file's bytes appear once in an answer; a file over the cap is skipped with
a note and the list goes on."""

import base64

from mcp.shared.exceptions import MCPError

from harness import server, structured, text

MAKE = """
import os, json
os.makedirs('out', exist_ok=True)
rows = ''.join(f'{i},{i * i}\\n' for i in range(5000))
open('out/big.csv', 'w').write('n,square\\n' + rows)
open('out/raw.bin', 'wb').write(bytes(range(256)))
result = 'made'
"""


async def test_collected_files_are_links_read_back_whole(mode):
    with server() as s:
        async with s.client(mode) as client:
            answer = await client.call_tool("run", {"lang": "python", "code": MAKE, "collect": ["out/*"]})
            body = structured(answer)
            links = [block for block in answer.content if block.type == "resource_link"]
            assert [(link.name, link.mime_type) for link in links] == [
                ("out/big.csv", "text/csv"), ("out/raw.bin", "application/octet-stream")], answer.content
            # The model's context gets the preview, not the 60 KB.
            assert len(text(answer)) < 4000, len(text(answer))
            csv = body["files"][0]
            assert csv["preview"].startswith("n,square\n0,0\n1,1\n") and csv["preview"].endswith("…"), csv
            assert "base64" not in csv
            assert csv["size"] > 50_000
            read = await client.read_resource(str(links[0].uri))
            assert read.contents[0].text.startswith("n,square\n") and len(read.contents[0].text) == csv["size"]
            raw = await client.read_resource(str(links[1].uri))
            assert base64.b64decode(raw.contents[0].blob) == bytes(range(256))
            tool = await client.call_tool("read_file", {"uri": str(links[1].uri)})
            assert not tool.is_error, text(tool)
            assert base64.b64decode(tool.content[0].resource.blob) == bytes(range(256))
            try:
                await client.read_resource(str(links[0].uri).replace("lk_", "lk_x", 1))
                raise AssertionError("an unknown link was read")
            except MCPError as err:
                assert "no such linked file" in str(err), err


async def test_inline_embeds_and_each_byte_appears_once(mode):
    with server() as s:
        async with s.client(mode) as client:
            # The figure shown, and saved and collected too: its bytes once.
            code = ("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.savefig('fig.png')\n"
                    "plt.show()\nopen('t.csv', 'w').write('a,b\\n1,2\\n')\nresult = 1")
            answer = await client.call_tool("run", {
                "lang": "python", "code": code, "collect": ["*.png", "*.csv"], "collect_mode": "inline"})
            body = structured(answer)
            kinds = [block.type for block in answer.content]
            assert kinds == ["text", "image", "text", "resource"], kinds
            head = answer.content[1].data[:80]
            assert answer.model_dump_json().count(head) == 1, "the shown figure once"
            assert answer.content[2].text == "fig.png: the same bytes as figure 1 above"
            assert answer.content[3].resource.text == "a,b\n1,2\n"
            assert body["images"] == [{"mime_type": "image/png"}], body["images"]
            assert all("base64" not in file for file in body["files"]), body["files"]


async def test_a_file_over_the_cap_is_skipped_and_the_list_goes_on(mode):
    with server("max_collect_bytes: 4096\n") as s:
        async with s.client(mode) as client:
            code = ("open('a-big.txt', 'w').write('x' * 10000)\n"
                    "open('b.txt', 'w').write('small b')\nopen('c.txt', 'w').write('small c')")
            body = structured(await client.call_tool(
                "run", {"lang": "python", "code": code, "collect": ["*.txt"]}))
            paths = [file["path"] for file in body["files"]]
            assert paths == ["b.txt", "c.txt", ""], body["files"]
            assert "a-big.txt (10000 bytes) skipped" in body["files"][2]["base64"], body["files"][2]
