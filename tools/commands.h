// tools/commands.h — one entry point per subcommand (tools/cmd_<name>.c).
// Each gets argv with argv[0] = the subcommand name and returns the exit
// code: 0 success, 1 runtime failure, 2 usage error.
#ifndef PQ_COMMANDS_H
#define PQ_COMMANDS_H

int main_calibrate(int argc, char **argv);
int main_convert(int argc, char **argv);
int main_export(int argc, char **argv);
int main_generate(int argc, char **argv);
int main_inspect(int argc, char **argv);
int main_ppl(int argc, char **argv);
int main_quantize(int argc, char **argv);

#endif
