package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.File;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.tools.DocumentationTool;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;

/**
 * The public API's Javadoc is complete: the JDK's javadoc, run with every
 * doclint check, reports no error and no warning (a public name without a
 * comment, a parameter or return left out, broken HTML).
 */
class JavadocTest {
  @Test
  void javadocIsCompleteAndClean() throws Exception {
    Path src = Path.of("src/main/java");
    List<String> files;
    try (Stream<Path> s = Files.walk(src)) {
      files = s.filter(p -> p.toString().endsWith(".java")).map(Path::toString).collect(Collectors.toList());
    }
    Path out = Files.createTempDirectory("fencer-javadoc");
    DocumentationTool tool = ToolProvider.getSystemDocumentationTool();
    List<String> args = new ArrayList<>(List.of("-quiet", "-Xdoclint:all", "-Xwerror", "-d", out.toString(),
        "-classpath", KleppmannTest.classPath(), "-sourcepath", src.toString()));
    args.addAll(files);
    StringWriter log = new StringWriter();
    int rc = tool.run(null, null, new java.io.PrintStream(new java.io.OutputStream() {
      @Override
      public void write(int b) {
        log.write(b);
      }
    }), args.toArray(new String[0]));
    assertEquals(0, rc, "javadoc: " + log);
    assertEquals(true, new File(out.toFile(), "io/github/fencerlock/fencer/FencedLock.html").exists());
    System.out.println("javadoc: " + files.size() + " files, written to " + out);
  }
}
