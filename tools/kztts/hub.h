/*
 * hub.h - `-m owner/name[@revision]`: a Hugging Face repository downloaded once
 * into a local cache and loaded from there.
 *
 * Environment (read here and nowhere else in kztts):
 *   KZTTS_HF_ENDPOINT, else HF_ENDPOINT, else https://huggingface.co
 *   HF_TOKEN                 sent as "Authorization: Bearer" when set
 *   KZTTS_CACHE, else $XDG_CACHE_HOME/kztts, else ~/.cache/kztts
 *   HF_HUB_OFFLINE=1         no network: use the cached copy or fail
 *   HF_HUB_DOWNLOAD_TIMEOUT  seconds below 1 KB/s before a transfer fails (default 30)
 *   KZTTS_HUB_RETRY_MS       milliseconds before the first retry of a failed request,
 *                            doubled for each further one (default 1000; tests shorten it)
 *
 * Cache layout: CACHE/models/OWNER--NAME/REVISION/ holds the checkpoint files as
 * the repo has them (config.json, model.safetensors, speech_tokenizer/...);
 * CACHE/models/OWNER--NAME/REVISION.manifest records the size and hash of every
 * verified file and whether the set is complete; CACHE/models/OWNER--NAME/.lock
 * serialises kztts processes working on the repo (flock).
 */
#ifndef KZ_HUB_H
#define KZ_HUB_H

/* Turns the -m argument into a local path. An argument that exists locally, starts
 * with '/', './', '../' or '~', or is not of the form owner/name[@revision] is
 * returned as is. Otherwise the repo is listed on the endpoint, the files kztts
 * needs that are missing or changed are downloaded and verified, and the cached
 * directory is returned; when the endpoint cannot be reached (or HF_HUB_OFFLINE is
 * set) a complete cached copy is used instead. A progress bar is drawn when stderr
 * is a terminal. Returns 0 with *dir owned by the caller (free()), or -1 after
 * printing one line "kztts CMD: ..." to stderr. */
int hub_resolve(const char *cmd, const char *arg, char **dir);

#endif
