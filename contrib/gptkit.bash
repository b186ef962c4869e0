# bash completion for the gptkit programs.
# Options come from each program's own --help, so they never drift from it;
# option arguments complete to the files that make sense for them.

_gptkit_opts()
{
	"$1" --help 2>/dev/null | grep -oE -- '(^|[ ,])--?[A-Za-z][A-Za-z0-9_-]*' |
		tr -d ' ,' | sort -u
}

_gptkit()
{
	local cur prev prog
	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	prog=${COMP_WORDS[0]}

	case "$prev" in
	-c|--config)
		COMPREPLY=($(compgen -f -X '!*.@(yaml|yml)' -- "$cur") $(compgen -d -- "$cur"))
		return ;;
	-m|--model)
		if [[ "$prog" == gpt-infer ]]; then
			# a bundle, a checkpoint or Hugging Face directory
			COMPREPLY=($(compgen -f -X '!*.@(tar.zst|tzst|tar.gz|tgz|tar)' -- "$cur") $(compgen -d -- "$cur"))
		else
			COMPREPLY=($(compgen -f -X '!*.@(yaml|yml)' -- "$cur") $(compgen -d -- "$cur"))
		fi
		return ;;
	--ppl)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--device)
		COMPREPLY=($(compgen -W "cpu cuda" -- "$cur"))
		return ;;
	-o|--override)
		case "$prog" in
		gpt-infer)
			COMPREPLY=($(compgen -W "$(gpt-train --list-keys 2>/dev/null | cut -f1 | grep '^Generation\.' | sed 's/$/=/')" -- "$cur"))
			compopt -o nospace 2>/dev/null
			return ;;
		gpt-train|gpt-launch) ;;
		*)	# elsewhere -o names an output
			COMPREPLY=($(compgen -f -- "$cur"))
			return ;;
		esac
		# Section.key=: every key gpt-train knows (gpt-config(5))
		COMPREPLY=($(compgen -W "$(gpt-train --list-keys 2>/dev/null | cut -f1 | sed 's/$/=/')" -- "$cur"))
		compopt -o nospace 2>/dev/null
		return ;;
	--format)
		case "$prog" in
		gpt-logparse) COMPREPLY=($(compgen -W "tsv csv json" -- "$cur")) ;;
		gpt-export) COMPREPLY=($(compgen -W "bundle gguf hf" -- "$cur")) ;;
		gpt-preprocess) COMPREPLY=($(compgen -W "auto text lines jsonl" -- "$cur")) ;;
		esac
		return ;;
	--plot)
		COMPREPLY=($(compgen -f -X '!*.svg' -- "$cur") $(compgen -d -- "$cur"))
		return ;;
	--params)
		COMPREPLY=($(compgen -W "124M 345M 760M 1.3B 2.7B 6.7B 13B 175B" -- "$cur"))
		return ;;
	--peak-tflops)
		COMPREPLY=($(compgen -W "312 989" -- "$cur"))
		return ;;
	--skip-steps|-j|--jobs|--doc|--world-size|--nproc-per-node|--nnodes|--node-rank|--max-restarts|--grace-period|--heartbeat-timeout|--devices|--master|\
	--tensor_parallel_degree|--pipeline_parallel_degree|--sharding_parallel_degree|--virtual_pp_degree|\
	-b|--batch|--threads|--stop|--json-key|--micro-batch-size|--rank|--nproc_per_node|--node_rank|--max_restarts|--gpus)
		return ;;
	--dtype)
		# gpt-ckpt-merge writes safetensors: no int8
		if [[ "$prog" == gpt-ckpt-merge ]]; then
			COMPREPLY=($(compgen -W "fp32 bf16 fp16" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "fp32 bf16 fp16 int8" -- "$cur"))
		fi
		return ;;
	-t|--tokenizer)
		# gpt-infer's -t is --threads
		[[ "$prog" == gpt-infer ]] && return
		COMPREPLY=($(compgen -W "gpt2 bytes" -- "$cur"))
		return ;;
	--sharding)
		COMPREPLY=($(compgen -W "stage1 stage2 stage3 offload" -- "$cur"))
		return ;;
	--to-layout)
		compopt -o nospace 2>/dev/null
		COMPREPLY=($(compgen -W "mp= tp= pp= vpp= dp= sharding= stage=" -- "${cur##*,}"))
		[[ "$cur" == *,* ]] && COMPREPLY=("${COMPREPLY[@]/#/${cur%,*},}")
		return ;;
	--vocab|--log-dir|--log_dir|--output)
		COMPREPLY=($(compgen -d -- "$cur"))
		return ;;
	esac

	# gpt-launch: after "--" or the program name, complete that program
	if [[ "$prog" == gpt-launch ]]; then
		local i
		for ((i = 1; i < COMP_CWORD; i++)); do
			case "${COMP_WORDS[i]}" in
			--) _command_offset $((i + 1)); return ;;
			--nproc-per-node|--devices|--nnodes|--node-rank|--master|--log-dir|--max-restarts|--grace-period|--heartbeat-timeout|\
			--nproc_per_node|--node_rank|--log_dir|--max_restarts|--gpus) ((i++)) ;;
			-*) ;;
			*) _command_offset $i; return ;;
			esac
		done
	fi

	if [[ "$cur" == -* ]]; then
		COMPREPLY=($(compgen -W "$(_gptkit_opts "$prog")" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}

complete -F _gptkit gpt-preprocess gpt-launch gpt-train gpt-ckpt-merge gpt-export gpt-infer gpt-logparse
