#!/bin/sh
# pq generate from the command line: streamed text == the --json text,
# deterministic across runs and --threads, a packed (W4A16) checkpoint,
# --chat with a ChatML template (in tokenizer_config.json or
# chat_template.jinja) and without a known one, --help, bad flags.
. tests/cli/lib.sh

P="Once upon a time"
gen() { $PQ generate "$@" --device cpu 2>"$TMP/err"; }

# streamed text, then --json: the same text and ids, on 1 and 2 threads
if gen "$FIXTURE" --prompt "$P" -n 40 >"$TMP/text" && gen "$FIXTURE" --prompt "$P" -n 40 --json --threads 1 >"$TMP/j1" &&
    gen "$FIXTURE" --prompt "$P" -n 40 --json --threads 2 >"$TMP/j2" &&
    [ "$(jq -c .ids "$TMP/j1")" = "$(jq -c .ids "$TMP/j2")" ] && [ "$(jq .generated_tokens "$TMP/j1")" = 40 ] &&
    [ "$(jq -r .stop "$TMP/j1")" = length ] && [ "$(jq -r .text "$TMP/j1")" = "$(cat "$TMP/text")" ] &&
    jq -e '.prompt_tokens == 5 and .decode_steps == 39 and .decode_tokens_per_s > 0 and .prompt_tokens_per_s > 0 and
        .decode_cpu_seconds > 0 and .prompt_cpu_seconds > 0' "$TMP/j1" >/dev/null; then
    ok "pq generate: streamed text == --json text, identical ids on 1 and 2 threads: $(head -c 60 "$TMP/text")..."
else
    fail "pq generate streamed vs --json: $(head -c 300 "$TMP/text") / $(head -c 300 "$TMP/j1") $(cat "$TMP/err")"
fi
grep -q 'pq generate: prompt 5 tokens, .* tokens/s; generated 40 tokens (stop: length), decode .* tokens/s (39 steps)' \
    "$TMP/err" && ok "speeds on stderr: $(tail -n 1 "$TMP/err")" || fail "stats line: $(cat "$TMP/err")"

# sampling: a seed repeats a run
gen "$FIXTURE" --prompt "$P" -n 30 --temp 0.9 --top-k 20 --top-p 0.9 --seed 5 --json >"$TMP/s1" &&
    gen "$FIXTURE" --prompt "$P" -n 30 --temp 0.9 --top-k 20 --top-p 0.9 --seed 5 --json --threads 1 >"$TMP/s2" &&
    [ "$(jq -c .ids "$TMP/s1")" = "$(jq -c .ids "$TMP/s2")" ] &&
    ok "--temp 0.9 --top-k 20 --top-p 0.9 --seed 5 repeats its ids" || fail "seeded sampling: $(cat "$TMP/err")"

# a packed W4A16 checkpoint: the fused GEMV on the stored codes
if $PQ quantize "$FIXTURE" -o "$TMP/q4" --scheme w4a16 --group 32 >/dev/null 2>&1 &&
    gen "$TMP/q4" --prompt "$P" -n 30 --json --threads 1 >"$TMP/q1" &&
    gen "$TMP/q4" --prompt "$P" -n 30 --json --threads 2 >"$TMP/q2" &&
    [ "$(jq -c .ids "$TMP/q1")" = "$(jq -c .ids "$TMP/q2")" ] && [ "$(jq .generated_tokens "$TMP/q1")" = 30 ]; then
    ok "W4A16 g32 checkpoint: greedy ids identical on 1 and 2 threads: $(jq -r .text "$TMP/q1" | head -c 50)..."
else
    fail "generate on a packed checkpoint: $(cat "$TMP/err")"
fi

# --chat: a ChatML template in tokenizer_config.json, then as chat_template.jinja. The
# prompt fed is the rendered text without BOS: the ids of a plain run on that text minus its BOS.
mkdir -p "$TMP/chat" "$TMP/jinja"
cp "$FIXTURE"/config.json "$FIXTURE"/model.safetensors "$FIXTURE"/tokenizer.json "$TMP/chat/"
cp "$FIXTURE"/config.json "$FIXTURE"/model.safetensors "$FIXTURE"/tokenizer.json "$FIXTURE"/tokenizer_config.json "$TMP/jinja/"
T="{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
jq --arg t "$T" '. + {chat_template: $t}' "$FIXTURE/tokenizer_config.json" >"$TMP/chat/tokenizer_config.json"
printf '%s' "$T" >"$TMP/jinja/chat_template.jinja"
RENDERED=$(printf '<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\nX')
RENDERED=${RENDERED%X} # $(...) drops trailing newlines
for d in chat jinja; do
    if gen "$TMP/$d" --prompt "Tell me a story." --chat -n 10 --json >"$TMP/c" &&
        gen "$FIXTURE" --prompt "$RENDERED" -n 1 --json >"$TMP/r" && [ "$(jq -r .chat "$TMP/c")" = ChatML ] &&
        [ "$(jq -c .prompt_ids "$TMP/c")" = "$(jq -c '.prompt_ids[1:]' "$TMP/r")" ]; then
        ok "--chat with a ChatML template ($d): the prompt is the rendered text, without BOS"
    else
        fail "--chat ChatML ($d): $(head -c 300 "$TMP/c") $(cat "$TMP/err")"
    fi
done
expect_fail 2 "no chat template" "--chat without a template" -- $PQ generate "$FIXTURE" --prompt hi --chat --device cpu
jq '. + {chat_template: "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}"}' \
    "$FIXTURE/tokenizer_config.json" >"$TMP/chat/tokenizer_config.json"
expect_fail 2 "not one pq knows (ChatML or Llama 3)" "--chat with an unknown template" -- \
    $PQ generate "$TMP/chat" --prompt hi --chat --device cpu

# --help: every flag with its default
$PQ generate --help >"$TMP/help"
missing=""
for f in "--prompt TEXT" "-n N .*(default: 128[,)]" "--temp T .*(default: 0[,)]" "--top-k K .*(default: 40[,)]" \
    "--top-p P .*(default: 0.95[,)]" "--seed S .*(default: 0[,)]" "--chat" "--max-ctx N .*(default: 0[,)]" \
    "--threads N .*(default: 0[,)]" "--device auto|cpu|cuda .*(default: auto)" "--json"; do
    grep -q -- "^  $f" "$TMP/help" || missing="$missing [$f]"
done
[ -z "$missing" ] && ok "pq generate --help lists every flag with its default" || fail "--help lacks$missing"

# bad flags and inputs: one line, exit 2 (usage) or 1 (runtime)
expect_fail 2 "--prompt TEXT is required" "no --prompt" -- $PQ generate "$FIXTURE"
expect_fail 2 "--top-p 1.5" "--top-p 1.5" -- $PQ generate "$FIXTURE" --prompt hi --top-p 1.5
expect_fail 2 "--temp -1" "--temp -1" -- $PQ generate "$FIXTURE" --prompt hi --temp -1
expect_fail 2 "--seed -3" "--seed -3" -- $PQ generate "$FIXTURE" --prompt hi --seed -3
expect_fail 2 "-n 0" "-n 0" -- $PQ generate "$FIXTURE" --prompt hi -n 0
expect_fail 2 "max_position_embeddings = 512" "--max-ctx past the model" -- $PQ generate "$FIXTURE" --prompt hi --max-ctx 600
expect_fail 2 "does not fit the context of 3" "a prompt longer than --max-ctx" -- \
    $PQ generate "$FIXTURE" --prompt "$P" --max-ctx 3 --device cpu
expect_fail 1 "not valid UTF-8" "a prompt that is not UTF-8" -- $PQ generate "$FIXTURE" --prompt "$(printf 'a\377b')" --device cpu
expect_fail 1 "no such model directory" "a missing model" -- $PQ generate "$TMP/nope" --prompt hi
finish
