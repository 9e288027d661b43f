#!/usr/bin/env python3
"""The viewer in a real browser: `eventkernel serve` on fixture stores, driven through headless
Chromium (Debian's chromium and chromedriver) with Selenium.

It clicks through overview -> streams -> search -> entity -> state at a version and at a
recording time -> event, on a generic store (imported notes with known recording times) and on
an Activities demo store, checks what each page says, checks that a token guards every page and
that a non-local address is refused without one, and saves a screenshot of every step in the
artefacts directory. Exit status 0 only when every check passed.

    python3 Tests/Browser/viewer_test.py --tool .build/debug/eventkernel --artifacts .build/browser-artifacts
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

NOTES = [
    ("2026-01-05T10:00:00Z", {"stream": {"type": "Note", "id": "n-1"}, "version": 1, "event": "Note.added", "schemaVersion": 1,
                              "codec": "binary", "data": {"title": "Groceries", "body": "milk", "tags": ["home"]}}),
    ("2026-01-06T11:00:00Z", {"stream": {"type": "Note", "id": "n-2"}, "version": 1, "event": "Note.added", "schemaVersion": 1,
                              "codec": "binary", "data": {"title": "Call <Ann>", "body": "about the trip", "tags": []}}),
    ("2026-02-10T12:30:00Z", {"stream": {"type": "Note", "id": "n-1"}, "version": 2, "event": "Note.updated", "schemaVersion": 1,
                              "codec": "binary", "data": {"title": "Groceries", "body": "milk, eggs", "tags": ["home", "weekly"]}}),
    ("2026-03-01T08:00:00Z", {"stream": {"type": "Note", "id": "n-2"}, "version": 2, "event": "Note.deleted", "schemaVersion": 1,
                              "codec": "none", "data": None}),
]

failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what, flush=True)
    if not condition:
        failures.append(what)


class Server:
    """`eventkernel serve STORE --port 0 ...`, its address read from its first line."""

    def __init__(self, tool, store, *extra):
        self.process = subprocess.Popen([tool, "serve", store, "--port", "0", *extra], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"http://([^/\s]+)/", line)
        if not match:
            self.process.kill()
            raise RuntimeError(f"serve did not start: {line!r} {self.process.stderr.read()}")
        self.base = "http://" + match.group(1)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def browser(artifacts):
    options = Options()
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,1000"]:
        options.add_argument(argument)
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver",
                      log_output=os.path.join(artifacts, "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    return driver


def text(driver, css):
    return driver.find_element(By.CSS_SELECTOR, css).text


def shot(driver, artifacts, name):
    driver.save_screenshot(os.path.join(artifacts, name + ".png"))


def generic_store_walk(driver, tool, work, artifacts):
    lines = os.path.join(work, "notes.jsonl")
    with open(lines, "w") as f:
        for recorded, event in NOTES:
            f.write(json.dumps({"recordedAt": recorded, **event}) + "\n")
    store = os.path.join(work, "notes")
    subprocess.run([tool, "import", store, lines], check=True, capture_output=True)
    server = Server(tool, store)
    try:
        driver.get(server.base + "/")
        shot(driver, artifacts, "01-overview")
        check(text(driver, "#event-count") == "4", "overview: 4 events")
        check(text(driver, "#stream-count") == "2", "overview: 2 streams")
        check("no damage found" in text(driver, "#integrity"), "overview: the integrity check's result")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#chart rect")) >= 2, "overview: a bar per period in the chart")

        driver.find_element(By.LINK_TEXT, "Note").click()
        shot(driver, artifacts, "02-streams")
        check(text(driver, "#matching").startswith("2 streams"), "streams: 2 Note streams")
        check("Call <Ann>" not in driver.page_source or "&lt;Ann&gt;" in driver.page_source, "streams: text escaped")

        box = driver.find_element(By.ID, "search")
        box.send_keys("N-1")
        driver.find_element(By.ID, "search-button").click()
        shot(driver, artifacts, "03-search")
        check(text(driver, "#matching").startswith("1 stream "), "search: one stream whose id contains N-1")

        driver.find_element(By.LINK_TEXT, "n-1").click()
        shot(driver, artifacts, "04-entity")
        items = driver.find_elements(By.CSS_SELECTOR, "#timeline > li")
        check(len(items) == 2, "entity: a timeline of 2 events")
        check("body changed" in items[1].text and "milk, eggs" in items[1].text, "entity: the update's diff names body")
        check("milk, eggs" in text(driver, "#state-json"), "entity: the state now")

        box = driver.find_element(By.ID, "as-of")
        box.send_keys("2026-01-31T00:00:00Z")
        driver.find_element(By.ID, "as-of-show").click()
        shot(driver, artifacts, "05-entity-as-of")
        state = text(driver, "#state-json")
        check('"milk"' in state and "eggs" not in state, "state as of 2026-01-31: the body before the update")
        check("version 1" in text(driver, "#moment"), "state as of 2026-01-31: version 1")

        slider = driver.find_element(By.ID, "version-slider")
        driver.execute_script("arguments[0].value = 2; arguments[0].dispatchEvent(new Event('input'));", slider)
        check(text(driver, "#version-shown") == "2", "slider: shows the version chosen")
        driver.find_element(By.ID, "version-show").click()
        shot(driver, artifacts, "06-entity-version")
        check("weekly" in text(driver, "#state-json"), "state after version 2: the tag added")

        driver.find_element(By.LINK_TEXT, "#0").click()
        shot(driver, artifacts, "07-event")
        check(text(driver, "#event-type") == "Note.added", "event: its type")
        check('"title": "Groceries"' in text(driver, "#payload"), "event: its decoded payload")
        check(text(driver, "#hex").startswith("00000000"), "event: its bytes in hex")
        driver.find_element(By.ID, "stream-link").click()
        check("n-1" in driver.find_element(By.TAG_NAME, "h1").text, "event: its stream's link leads to the entity")

        driver.get(server.base + "/entity?type=Note&id=n-2")
        shot(driver, artifacts, "08-deleted-entity")
        check("deleted" in text(driver, "#state-note"), "a deleted entity: no state now")
        driver.get(server.base + "/streams?type=Nope")
        check("404" in driver.find_element(By.TAG_NAME, "h1").text, "an unknown type: 404")
    finally:
        server.stop()
    return store


def activities_walk(driver, tool, work, artifacts):
    store = os.path.join(work, "demo")
    subprocess.run([tool, "demo", store, "--activities", "2000"], check=True, capture_output=True)
    server = Server(tool, store)
    try:
        driver.get(server.base + "/")
        shot(driver, artifacts, "10-activities-overview")
        check(int(text(driver, "#event-count").replace(",", "")) > 2000, "activities: every event counted")
        driver.find_element(By.LINK_TEXT, "activity").click()
        check(len(driver.find_elements(By.CSS_SELECTOR, "#streams a")) == 50, "activities: 50 streams a page")
        driver.find_element(By.ID, "next-page").click()
        check(len(driver.find_elements(By.CSS_SELECTOR, "#streams a")) == 50, "activities: the next page")
        driver.find_elements(By.CSS_SELECTOR, "#streams a")[0].click()
        shot(driver, artifacts, "11-activity")
        check('"startDate"' in text(driver, "#state-json"), "an activity: its state")
    finally:
        server.stop()


def token_checks(driver, tool, store, artifacts):
    token = "browser-suite-token-0123456789"
    refused = subprocess.run([tool, "serve", store, "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True, timeout=60)
    check(refused.returncode == 1 and "--token" in refused.stderr, "a non-local address without a token is refused")
    server = Server(tool, store, "--token", token)
    try:
        try:
            urllib.request.urlopen(server.base + "/", timeout=10)
            check(False, "token: a request without it is refused")
        except urllib.error.HTTPError as error:
            check(error.code == 401, "token: a request without it gets 401")
        driver.get(server.base + "/?token=" + token)
        shot(driver, artifacts, "20-token")
        check(text(driver, "#event-count") == "4", "token: the link with it opens the overview")
        check("token" not in driver.current_url, "token: the address no longer holds it")
        driver.get(server.base + "/streams?type=Note")
        check(text(driver, "#matching").startswith("2 streams"), "token: the cookie carries it to the next page")
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--artifacts", required=True)
    arguments = parser.parse_args()
    tool = os.path.abspath(arguments.tool)
    os.makedirs(arguments.artifacts, exist_ok=True)
    work = tempfile.mkdtemp(prefix="ek-browser-")
    started = time.time()
    driver = browser(arguments.artifacts)
    try:
        store = generic_store_walk(driver, tool, work, arguments.artifacts)
        activities_walk(driver, tool, work, arguments.artifacts)
        token_checks(driver, tool, store, arguments.artifacts)
    except Exception as error:  # a step that could not run at all is a failure, with its page saved
        shot(driver, arguments.artifacts, "failure")
        failures.append(f"{type(error).__name__}: {error}")
        print(f"FAIL  {type(error).__name__}: {error}", flush=True)
    finally:
        driver.quit()
        shutil.rmtree(work, ignore_errors=True)
    print(f"browser suite: {len(failures)} failed, screenshots in {arguments.artifacts} ({time.time() - started:.1f} s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
