"""The package as its users get it: an empty Maven project with the README's
dependency snippet (after `mvn install` of clients/java) compiles the README's
quick start. Run by `make test-java`; argument: the mvn command."""

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    mvn = sys.argv[1] if len(sys.argv) > 1 else "mvn"
    readme = (HERE / "README.md").read_text()
    dependency = re.search(r"```xml\n(<dependency>.*?</dependency>)\n```", readme, re.S)
    quick = re.search(r"## Quick start.*?```java\n(.*?)```", readme, re.S)
    if not dependency or not quick:
        print("install check: no dependency snippet or quick start in README.md", file=sys.stderr)
        return 1
    project = Path(tempfile.mkdtemp(prefix="rwlock-java-install-"))
    try:
        (project / "src/main/java").mkdir(parents=True)
        (project / "src/main/java/QuickStart.java").write_text(quick.group(1))
        (project / "pom.xml").write_text(f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>uses-rwlock</artifactId>
  <version>1</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    {dependency.group(1)}
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.13.0</version>
      </plugin>
    </plugins>
  </build>
</project>
""")
        done = subprocess.run(
            [mvn, "-B", "-q", "-ntp", "-Dstyle.color=never", "compile"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if done.returncode != 0 or not (project / "target/classes/QuickStart.class").is_file():
            print(done.stdout, file=sys.stderr)
            print("install check: the quick start did not compile against the installed package", file=sys.stderr)
            return 1
        print("install check: an empty project with the README's dependency compiles its quick start")
        return 0
    finally:
        shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
